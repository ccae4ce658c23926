"""The loopback cluster that the Ray tier and `make bench` share
(local_cluster.py) starts and serves on a machine where an earlier local
`ray.init()` left a token file (~/.ray/auth_token): Ray 2.60 then turns on
token authentication for `ray start`'s nodes, and a driver without it could
not connect (InvalidAuthToken), which is how the bench's rewardbox-ray
contestant failed."""

from local_cluster import LocalCluster
from test_modes import LIMITS, SAMPLES

from rewardbox.rewards import CodeReward
from rewardbox.sandbox.config import SandboxConfig
from rewardbox.sandbox.ray_backend import RaySandbox


def test_the_cluster_serves_beside_a_ray_token_file(tmp_path, monkeypatch):
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("a" * 64)
    monkeypatch.setenv("HOME", str(tmp_path))  # the driver's home and, through the environment, the nodes'
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)  # as in a process that set nothing
    with LocalCluster(nodes=1) as cluster, \
            RaySandbox(SandboxConfig(ray=cluster.address, mode="pooled", limits=LIMITS, max_containers=1)) as box:
        output, = CodeReward(box, limits=LIMITS).score_many(SAMPLES[:1])  # a right answer
    assert (output.verdict, output.reward) == ("passed", 1.0)
