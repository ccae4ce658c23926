"""The engine boundary: the attach channel demultiplexes docker's frames and
reads with a deadline, the container state is a frozen value, and the end of a
run (the harness's failures, a container lost) is one routine for both paths."""

import http.client
import socket
import time
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from rewardbox.sandbox import ContainerLost, HarnessError, Verdict
from rewardbox.sandbox.engine import FRAME_HEADER, AttachChannel, ContainerState, container_state, hijacked_channel
from rewardbox.sandbox.protocol import PHASE_HARNESS_ERROR, PROTOCOL_VERSION, Report
from rewardbox.sandbox.runner import ContainerFate, Sandbox


def frame(stream: int, payload: bytes) -> bytes:
    return FRAME_HEADER.pack(stream, len(payload)) + payload


def read_to_eof(channel: AttachChannel) -> None:
    while channel.read(time.monotonic() + 5):
        pass


@pytest.fixture
def pair():
    ours, theirs = socket.socketpair()
    channel = AttachChannel(ours)
    yield channel, theirs
    channel.close()
    theirs.close()


def test_frames_split_across_reads_are_put_together_per_stream(pair):
    channel, theirs = pair
    stream = frame(1, b"hello ") + frame(2, b"oops") + frame(1, b"world")
    theirs.sendall(stream[:3])  # not even a whole header
    assert channel.read(time.monotonic() + 5)
    assert (bytes(channel.stdout), bytes(channel.stderr), channel.received) == (b"", b"", 3)
    theirs.sendall(stream[3:])
    theirs.shutdown(socket.SHUT_WR)
    read_to_eof(channel)
    assert (bytes(channel.stdout), bytes(channel.stderr)) == (b"hello world", b"oops")
    assert channel.received == len(b"hello world" + b"oops")


def test_only_the_tail_of_stderr_is_kept_when_asked():
    ours, theirs = socket.socketpair()
    channel = AttachChannel(ours, stderr_tail=4)
    theirs.sendall(frame(2, b"abcdef") + frame(2, b"gh"))
    theirs.shutdown(socket.SHUT_WR)
    read_to_eof(channel)
    assert bytes(channel.stderr) == b"efgh"
    channel.close()
    theirs.close()


def test_a_read_past_its_deadline_raises_timeout_and_eof_is_false(pair):
    channel, theirs = pair
    with pytest.raises(TimeoutError):
        channel.read(time.monotonic() - 1)
    with pytest.raises(TimeoutError):
        channel.read(time.monotonic() + 0.05)  # nothing arrives
    theirs.shutdown(socket.SHUT_WR)
    assert channel.read(time.monotonic() + 5) is False


def test_send_and_end_input_reach_the_container(pair):
    channel, theirs = pair
    channel.send(b"request")
    channel.end_input()
    assert theirs.recv(100) == b"request"
    assert theirs.recv(100) == b""  # EOF on its stdin


def hijacked(ours: socket.socket):
    """What docker-py's `exec_start(socket=True)` returns once http.client read
    the engine's answer on `ours`: the SocketIO under its buffered reader,
    the response kept on it."""
    response = http.client.HTTPResponse(ours)
    response.begin()
    sock_io = response.fp.raw
    sock_io._response = SimpleNamespace(raw=SimpleNamespace(_fp=response))
    return sock_io


UPGRADED = b"HTTP/1.1 101 UPGRADED\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n"


def test_a_hijacked_stream_keeps_the_frames_read_in_with_its_headers():
    """The engine's headers and the program's first frame arrived together:
    http.client's buffered reader took both, and the channel starts with
    the frame (docker-py handed over the raw socket: the frame was lost)."""
    ours, theirs = socket.socketpair()
    theirs.sendall(UPGRADED + frame(1, b"early "))
    ours.settimeout(60)
    sock_io = hijacked(ours)
    assert sock_io._response.raw._fp.fp.peek() == frame(1, b"early ")  # the premise: the reader holds it, not the socket
    channel = hijacked_channel(sock_io)
    assert bytes(channel.stdout) == b"early "
    assert ours.gettimeout() == 60  # left as docker-py set it
    theirs.sendall(frame(1, b"late"))
    theirs.shutdown(socket.SHUT_WR)
    read_to_eof(channel)
    assert bytes(channel.stdout) == b"early late"
    channel.close()
    theirs.close()


def test_a_hijacked_stream_with_nothing_buffered_does_not_wait():
    ours, theirs = socket.socketpair()
    theirs.sendall(UPGRADED)
    began = time.monotonic()
    channel = hijacked_channel(hijacked(ours))
    assert channel.received == 0 and time.monotonic() - began < 1
    channel.close()
    theirs.close()


def test_the_container_state_is_a_frozen_value_of_docker_s_state_dict():
    state = container_state({"Running": False, "ExitCode": 137, "OOMKilled": True, "Pid": 0})
    assert state == ContainerState(exit_code=137, oom_killed=True)
    with pytest.raises(ValidationError):
        state.exit_code = 0  # type: ignore[misc]  # the point: frozen


def report(**fields) -> Report:
    return Report(version=PROTOCOL_VERSION, **fields)


def test_a_harness_failure_not_caused_by_the_run_is_ours():
    with pytest.raises(HarnessError, match="boom"):
        Sandbox._finish("c" * 64, report(phase=PHASE_HARNESS_ERROR, message="boom"), ContainerFate(), 0.0)


def test_a_run_whose_code_never_started_is_lost_and_repeated_elsewhere():
    with pytest.raises(ContainerLost, match="could not start the run"):
        Sandbox._finish("c" * 64, report(phase=PHASE_HARNESS_ERROR, message="fork", not_started=True), None, 0.0)


def test_a_harness_failure_the_run_caused_is_judged():
    result = Sandbox._finish("c" * 64, report(phase=PHASE_HARNESS_ERROR, message="x", harness_attacked=True),
                             ContainerFate(exit_code=1), time.monotonic())
    assert result.verdict is Verdict.KILLED


def test_the_end_of_a_reused_container_comes_from_its_report_and_of_a_stopped_one_from_its_fate():
    assert Sandbox._finish("c", None, ContainerFate(exit_code=137, oom_killed=True), 0.0).verdict \
        is Verdict.OUT_OF_MEMORY
    assert Sandbox._finish("c", report(oom_killed=True), None, 0.0).verdict is Verdict.OUT_OF_MEMORY
    assert Sandbox._finish("c", None, ContainerFate(exit_code=1), 0.0, deadline_hit=True).verdict is Verdict.TIMEOUT


class StoppedFromOutside:
    """An engine whose container did not report, exited 137 and was killed by someone else."""

    def __init__(self, oom: bool = False):
        self.killed: list[str] = []
        self.oom = oom

    def kill(self, container_id):
        self.killed.append(container_id)

    def wait(self, container_id, timeout_s):
        return ContainerState(exit_code=137, oom_killed=self.oom), False

    def stopped_from_outside(self, container_id, since):
        return True


def stop(engine, report=None, killed=False) -> ContainerFate:
    box = Sandbox.__new__(Sandbox)
    box.engine = engine
    return box._stop("c" * 64, report, killed=killed, created_at=0.0, sent_at=0.0)


def test_a_cold_container_stopped_from_outside_is_lost():
    with pytest.raises(ContainerLost, match="stopped from outside .exit code 137"):
        stop(StoppedFromOutside())


def test_a_cold_container_we_killed_or_that_ran_out_of_memory_or_reported_is_not_lost():
    engine = StoppedFromOutside()
    assert stop(engine, killed=True) == ContainerFate(exit_code=137)
    assert engine.killed == ["c" * 64]  # kill, then wait
    assert stop(StoppedFromOutside(oom=True)) == ContainerFate(exit_code=137, oom_killed=True)
    assert stop(StoppedFromOutside(), report=report()).lost is None
