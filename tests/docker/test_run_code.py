"""SandboxFusion's `/run_code` over a real socket, with verl's request exactly
as verl's client (`verl/utils/reward_score/sandbox_fusion/utils.py`,
`call_sandbox_api`) builds it: a JSON string posted with these headers."""

import base64
import json
import re
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from server import running_server

from rewardbox.rewards.server import ServerSettings

HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}
SUM = "a, b = map(int, input().split())\nprint(a + b)\n"


def verl_call(url: str, code: str, stdin: str | None, timeout: int = 10, memory_limit_mb: int = 1024,
              language: str = "python") -> requests.Response:
    payload = json.dumps({"compile_timeout": timeout, "run_timeout": timeout, "code": code, "stdin": stdin,
                          "memory_limit_MB": memory_limit_mb, "language": language, "files": {}, "fetch_files": []})
    # verl's own HTTP timeout: compile + run + 10 s.
    return requests.post(f"{url}/run_code", headers=HEADERS, data=payload, timeout=timeout + timeout + 10)


def ok(response: requests.Response) -> dict:
    assert response.status_code == 200, response.text
    return response.json()


def test_stdin_test_case_prints_the_answer(server_url):
    out = ok(verl_call(server_url, SUM, "1 2\n"))

    assert out["status"] == "Success" and out["message"] == ""
    assert out["compile_result"] is None
    run = out["run_result"]
    assert (run["status"], run["return_code"], run["stdout"], run["stderr"]) == ("Finished", 0, "3\n", "")
    assert 0 < run["execution_time"] < 10
    assert out["files"] == {}


def test_missing_stdin_is_end_of_file(server_url):
    # verl sends "stdin": null for a case without input.
    out = ok(verl_call(server_url, "import sys\nprint(repr(sys.stdin.read()))", None))

    assert (out["status"], out["run_result"]["stdout"]) == ("Success", "''\n")


def test_endless_loop_is_time_limit_exceeded(server_url):
    out = ok(verl_call(server_url, "while True:\n    pass\n", "1 2\n", timeout=1))

    assert out["status"] == "Failed"
    run = out["run_result"]
    assert (run["status"], run["return_code"]) == ("TimeLimitExceeded", None)
    assert run["execution_time"] >= 1


def test_output_before_the_timeout_is_kept(server_url):
    out = ok(verl_call(server_url, "print('partial', flush=True)\nwhile True:\n    pass\n", "", timeout=1))

    assert (out["run_result"]["status"], out["run_result"]["stdout"]) == ("TimeLimitExceeded", "partial\n")


@pytest.mark.parametrize("code", [
    pytest.param("x = bytearray(1 << 30)\nprint('survived')", id="one-large-block"),
    pytest.param("x = []\nwhile True:\n    x.append(bytearray(1 << 20))", id="growing"),
])
def test_memory_bomb_is_a_runtime_error(server_url, code):
    out = ok(verl_call(server_url, code, "", timeout=10, memory_limit_mb=64))

    # What verl counts as a runtime error: Failed, Finished with a non-zero return code.
    assert out["status"] == "Failed"
    run = out["run_result"]
    assert run["status"] == "Finished" and run["return_code"] not in (0, None)
    assert "survived" not in run["stdout"]
    assert out["message"] == "memory limit exceeded"


def test_exception_is_failed_with_return_code_and_traceback(server_url):
    out = ok(verl_call(server_url, "n = int(input())\nraise ValueError(f'boom {n}')\n", "7\n"))

    assert out["status"] == "Failed"
    run = out["run_result"]
    assert (run["status"], run["return_code"]) == ("Finished", 1)
    assert run["stderr"].startswith("Traceback (most recent call last):")
    assert run["stderr"].rstrip().endswith("ValueError: boom 7")


def test_exit_status_is_passed_through(server_url):
    out = ok(verl_call(server_url, "import sys\nprint('x')\nsys.exit(3)", ""))

    assert (out["status"], out["run_result"]["return_code"], out["run_result"]["stdout"]) == ("Failed", 3, "x\n")


def test_syntax_error_is_reported_as_python_reports_it(server_url):
    out = ok(verl_call(server_url, "def f(:\n    return 1\n", ""))

    assert out["status"] == "Failed" and out["compile_result"] is None
    run = out["run_result"]
    assert (run["status"], run["return_code"]) == ("Finished", 1)
    assert "SyntaxError" in run["stderr"]
    assert out["message"].startswith("SyntaxError:")


def test_python3_is_accepted(server_url):
    assert ok(verl_call(server_url, SUM, "2 3", language="python3"))["run_result"]["stdout"] == "5\n"


def test_files_are_written_beside_the_code_and_fetched_back(server_url):
    blob = bytes(range(256))
    body = {"code": "import helper\ndata = open('data/in.bin', 'rb').read()\n"
                    "open('out.bin', 'wb').write(data[::-1])\nprint(helper.NAME, len(data))",
            "language": "python",
            "files": {"helper.py": base64.b64encode(b"NAME = 'helper'\n").decode(),
                      "data/in.bin": base64.b64encode(blob).decode()},
            "fetch_files": ["out.bin", "data/in.bin", "missing.txt"]}

    out = ok(requests.post(f"{server_url}/run_code", json=body, timeout=30))

    assert (out["status"], out["run_result"]["stdout"]) == ("Success", "helper 256\n")
    assert set(out["files"]) == {"out.bin", "data/in.bin"}  # a missing file is left out, as SandboxFusion does
    assert base64.b64decode(out["files"]["out.bin"]) == blob[::-1]


def test_fetch_does_not_follow_a_symlink_out_of_the_work_dir(server_url):
    body = {"code": "import os\nos.symlink('/opt/rewardbox/supervisor.py', 'out.txt')\nos.mkfifo('pipe')",
            "language": "python", "fetch_files": ["out.txt", "pipe"]}

    out = ok(requests.post(f"{server_url}/run_code", json=body, timeout=30))

    assert (out["status"], out["files"]) == ("Success", {})


def test_large_output_comes_back_whole(server_url):
    # Competitive-programming answers can be long; verl compares all of stdout.
    out = ok(verl_call(server_url, "import sys\nfor i in range(200000):\n    sys.stdout.write(f'{i}\\n')", ""))

    assert out["status"] == "Success"
    assert out["run_result"]["stdout"] == "".join(f"{i}\n" for i in range(200000))


def test_endless_output_is_stopped(server_url):
    out = ok(verl_call(server_url, "while True:\n    print('x' * 1000)", "", timeout=10))

    assert out["status"] == "Failed"
    assert (out["run_result"]["status"], out["run_result"]["return_code"]) == ("Finished", -9)
    assert out["message"] == "output limit exceeded"


def test_test_cases_in_parallel_as_verl_sends_them(server_url):
    cases = [(f"{a} {b}\n", f"{a + b}\n") for a in range(4) for b in range(4)]

    with ThreadPoolExecutor(len(cases)) as pool:
        outs = list(pool.map(lambda case: ok(verl_call(server_url, SUM, case[0])), cases))

    assert [o["run_result"]["stdout"] for o in outs] == [expected for _, expected in cases]
    assert {o["status"] for o in outs} == {"Success"}


@pytest.mark.parametrize("body, status, detail", [
    ({"language": "python"}, 422, "code: Field required"),
    ({"code": "print(1)"}, 422, "language: Field required"),
    ({"code": "print(1)", "language": "python", "run_timeout": "soon"}, 422, "run_timeout"),
    ({"code": "#" * ((1 << 20) + 1), "language": "python"}, 413, "code[0] is over the limit"),
])
def test_bad_requests_get_clear_errors(server_url, body, status, detail):
    response = requests.post(f"{server_url}/run_code", json=body, timeout=30)

    assert response.status_code == status, response.text
    assert detail in response.json()["detail"]


def test_a_request_still_waiting_near_verls_deadline_gets_504_and_its_retry_gets_the_run(sandbox):
    # verl gives up on an attempt after compile + run + 10 s (a failed test case) but retries a 504.
    # Room for one: the second request waits behind the first; with this margin it is answered 504
    # after 3 s, its run keeping its place, and the same body again gets that run's answer: run once.
    settings = ServerSettings(max_waiting_samples=1, run_code_margin_s=27, retry_after_s=2)
    code = "import time\ntime.sleep(4)\nprint('done')"
    with running_server(sandbox, settings) as url:
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(verl_call, url, code, "1", timeout=20)  # held up to 20 + 20 + 10 - 27 s
            time.sleep(0.5)
            held = verl_call(url, code, "2")
            attempts = [held]
            while attempts[-1].status_code == 504 and len(attempts) < 3:  # as verl: the same body again
                time.sleep(len(attempts))  # verl's 1 s, then 2 s
                attempts.append(verl_call(url, code, "2"))
            metrics = requests.get(f"{url}/metrics", timeout=30).text
        assert ok(first.result())["run_result"]["stdout"] == "done\n"

    assert held.status_code == 504, held.text
    assert held.headers["Retry-After"] == "2" and "keeps its place" in held.json()["detail"]
    assert ok(attempts[-1])["status"] == "Success"  # within verl's two retries
    assert re.search(r'^rewardbox_samples_scored_total\{verdict="passed"\} 2\.0$', metrics, re.M), metrics


def test_no_container_or_process_left_behind(server_url, leftovers):
    for code in ("while True:\n    pass", "x = bytearray(1 << 30)", "import os\nwhile True:\n    os.fork()"):
        verl_call(server_url, code, "", timeout=1, memory_limit_mb=64)

    assert leftovers() == {"containers": [], "processes": []}
