"""The engine wrapper's retry rules, against a fake Docker API (no engine)."""

import docker.errors
import pytest
import requests
import requests.exceptions
import urllib3.exceptions

from rewardbox.sandbox import ContainerLost, EngineUnavailable, Limits, RuntimeMissing
from rewardbox.sandbox.engine import ContainerState, DockerEngine, _transient


class LostAnswerAPI:
    """Creates the container, then loses the answer once, as a dropped
    connection would; a second create meets the name it already holds."""

    def __init__(self):
        self.containers: dict[str, str] = {}
        self.configs: list[dict] = []
        self.create_calls = 0

    def create_host_config(self, **kwargs):
        return dict(kwargs)

    def create_container_config(self, image, command, **kwargs):
        return {"Image": image, **kwargs}

    def create_container_from_config(self, config, name):
        self.create_calls += 1
        self.configs.append(config)
        if name in self.containers:
            response = requests.Response()
            response.status_code = 409
            raise docker.errors.APIError("Conflict. The container name is already in use", response=response)
        self.containers[name] = f"id-{len(self.containers)}"
        raise requests.exceptions.ConnectionError("connection reset by peer")

    def inspect_container(self, name):
        return {"Id": self.containers[name]}


def engine_with(api, retry_s=5.0) -> DockerEngine:
    engine = DockerEngine.__new__(DockerEngine)
    engine.retry_s = retry_s
    engine._sleep = lambda seconds: None  # retries without waiting
    engine.owner = "host:1:1"
    engine._api = api
    return engine


def test_a_create_retried_after_a_lost_answer_adopts_the_container_instead_of_making_another():
    api = LostAnswerAPI()
    engine = engine_with(api)

    container_id = engine.create("rewardbox/python:test", Limits(), name="rewardbox-abc")

    assert container_id == "id-0"
    assert api.containers == {"rewardbox-abc": "id-0"}
    assert api.create_calls == 2


def test_an_engine_that_never_answers_raises_engine_unavailable_with_the_fix():
    class DownAPI:
        calls = 0

        def inspect_image(self, image):
            DownAPI.calls += 1
            raise requests.exceptions.ConnectionError("no such file or directory")

    engine = engine_with(DownAPI(), retry_s=0.2)
    with pytest.raises(EngineUnavailable, match="start a Docker engine"):
        engine.require_image("rewardbox/python:test")
    assert DownAPI.calls >= 2  # retried before giving up


def api_error(status: int, cls=docker.errors.APIError) -> docker.errors.APIError:
    response = requests.Response()
    response.status_code = status
    return cls("engine said no", response=response)


@pytest.mark.parametrize("exc, transient", [
    (requests.exceptions.ConnectionError("refused"), True),
    (requests.exceptions.ReadTimeout("slow"), True),
    (ConnectionResetError(), True),
    (api_error(500), True),
    (api_error(503), True),
    (api_error(409), False),
    (api_error(400), False),
    (api_error(404, docker.errors.NotFound), False),
    (docker.errors.ImageNotFound("no image"), False),
    (ValueError("a bug of ours"), False),
])
def test_only_engine_side_failures_are_retried(exc, transient):
    assert _transient(exc) is transient


def test_an_engine_out_of_disk_space_says_so_and_names_the_fix():
    class FullAPI:
        def inspect_image(self, image):
            raise docker.errors.APIError("Internal Server Error", response=api_error(500).response,
                                         explanation="mkdir /var/lib/docker/overlay2/x-init: no space left on device")

    engine = engine_with(FullAPI(), retry_s=0.1)
    with pytest.raises(EngineUnavailable, match="out of disk space.*Docker Root Dir"):
        engine.require_image("rewardbox/python:test")


class GoneAPI:
    """A container removed from outside: every call about it is a 404."""

    def wait(self, container_id, timeout, condition=None):
        raise api_error(404, docker.errors.NotFound)

    def start(self, container_id):
        raise api_error(404, docker.errors.NotFound)

    def attach_socket(self, container_id, params):
        raise api_error(404, docker.errors.NotFound)


@pytest.mark.parametrize("call", [
    lambda engine: engine.wait("abc", timeout_s=1),
    lambda engine: engine.start("abc"),
    lambda engine: engine.attach("abc"),
])
def test_a_container_removed_from_outside_is_lost_not_judged(call):
    with pytest.raises(ContainerLost, match="removed from outside"):
        call(engine_with(GoneAPI()))


def test_a_lost_connection_while_waiting_raises_instead_of_judging_the_container():
    class DroppedAPI:
        def wait(self, container_id, timeout, condition=None):
            raise requests.exceptions.ConnectionError("connection aborted")

    with pytest.raises(OSError):  # Sandbox.run repeats the whole run on OSError
        engine_with(DroppedAPI()).wait("abc", timeout_s=1)


@pytest.mark.parametrize("timeout", [
    # the engine's answer had not begun
    requests.exceptions.ReadTimeout("read timed out"),
    # its headers came at once, the body not in time: how a real engine's wait times out
    requests.exceptions.ConnectionError(urllib3.exceptions.ReadTimeoutError(None, None, "Read timed out.")),
], ids=["before-headers", "in-body"])
def test_a_wait_that_times_out_kills_the_container_and_says_so(timeout):
    class SlowAPI:
        killed = []

        def wait(self, container_id, **_):
            raise timeout

        def kill(self, container_id):
            self.killed.append(container_id)

        def inspect_container(self, container_id):
            return {"State": {"ExitCode": 137, "OOMKilled": False}}

    api = SlowAPI()
    state, killed = engine_with(api).wait("abc", timeout_s=1)

    assert (state, killed, api.killed) == (ContainerState(exit_code=137), True, ["abc"])


@pytest.mark.parametrize("events, outside", [([], False), ([{"status": "kill", "id": "abc"}], True)])
def test_stopped_from_outside_asks_the_engine_for_kill_events_of_that_container(events, outside):
    class EventsAPI:
        asked = {}

        def events(self, **kwargs):
            self.asked = kwargs
            return iter(events)

    api = EventsAPI()
    assert engine_with(api).stopped_from_outside("abc", since=1000.0) is outside
    assert api.asked["filters"] == {"container": "abc", "event": ["kill", "stop", "destroy"]}
    assert api.asked["since"] == "999.000000000"


class InfoAPI:
    def info(self):
        return {"Runtimes": {"runc": {"path": "runc"}, "gvisor": {"path": "/usr/bin/runsc", "runtimeArgs": []}}}


@pytest.mark.parametrize("runtime, gvisor", [(None, False), ("runc", False), ("gvisor", True)])
def test_a_registered_runtime_is_accepted_and_gvisor_recognised_by_its_binary(runtime, gvisor):
    assert engine_with(InfoAPI()).require_runtime(runtime) is gvisor


def test_a_runtime_the_engine_does_not_know_names_make_gvisor():
    with pytest.raises(RuntimeMissing, match=r"no runtime 'runsc' \(it has: gvisor, runc\): run `make gvisor`"):
        engine_with(InfoAPI()).require_runtime("runsc")


def test_under_gvisor_the_pids_limit_makes_room_for_gvisors_own_threads():
    api = LostAnswerAPI()
    engine = engine_with(api)
    engine.create("rewardbox/python:test", Limits(pids=64), name="a")
    engine.create("rewardbox/python:test", Limits(pids=64), name="b", gvisor=True)

    limits = [config["host_config"]["pids_limit"] for config in api.configs]
    assert limits == [64, 64, 64 + 6 * 64, 64 + 6 * 64]  # each create is tried twice by this fake


class ExecAPI:
    """An exec into a container in the state the engine answers with."""

    def __init__(self, status: int, explanation: str):
        self.status, self.explanation = status, explanation

    def exec_create(self, container_id, command, **kwargs):
        response = requests.Response()
        response.status_code = self.status
        raise docker.errors.APIError("exec failed", response=response, explanation=self.explanation)


@pytest.mark.parametrize(("status", "explanation"), [
    (409, "container abc is not running"),
    # A session closed while a call of another thread starts: the engine answers 500, not 409.
    (500, "Could not kill running container abc, cannot remove - removal in progress"),
    (500, "Removal In Progress"),
])
def test_an_exec_into_a_container_going_away_is_a_lost_container(status, explanation):
    with pytest.raises(ContainerLost):
        engine_with(ExecAPI(status, explanation)).exec("abc", ["true"])


def test_an_exec_the_engine_refuses_for_another_reason_is_its_error():
    with pytest.raises(docker.errors.APIError):
        engine_with(ExecAPI(500, "OCI runtime exec failed")).exec("abc", ["true"])


class RemovedUnderTheWaitAPI:
    """A container a forced `docker rm` removed while the engine's wait for
    its removal was being set up: the wait never returns (the engine made the
    removal's channel anew), though the container is gone."""

    def __init__(self):
        self.waits: list[float] = []
        self.kills = 0

    def wait(self, container_id, timeout, condition):
        self.waits.append(timeout)
        raise requests.exceptions.ConnectionError(urllib3.exceptions.ReadTimeoutError(None, None, "read timed out"))

    def inspect_container(self, container_id):
        raise api_error(404, docker.errors.NotFound)

    def kill(self, container_id):
        self.kills += 1
        raise api_error(404, docker.errors.NotFound)

    def events(self, since, until, decode, filters):
        return [{"Action": "kill", "timeNano": 2_000_000_000},
                {"Action": "die", "timeNano": 2_100_000_000, "Actor": {"Attributes": {"exitCode": "137"}}}]


def test_a_container_removed_under_the_wait_is_found_gone_not_taken_for_one_we_killed():
    api = RemovedUnderTheWaitAPI()
    engine = engine_with(api)

    end, killed = engine.ended("id-0", since=1.0, timeout_s=30)

    assert not killed and api.kills == 0  # so its run is repeated as a lost one, not judged
    assert end.stopped_from_outside and end.exit_code == 137
    assert api.waits == [1.0]  # one short wait, then a look found it gone; not the whole 30 s
