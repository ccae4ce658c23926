"""The service's own settings (`ServerSettings`) and their defaults. Light
(pydantic, no FastAPI): `rewardbox.settings` reads the defaults and makes
`ServerSettings` without loading the service.
"""

from pydantic import BaseModel, ConfigDict, Field

from rewardbox.rewards.sandboxfusion import RunCodeSettings

# The service's queue sizes and its completion cap (the settings' defaults too).
MAX_WAITING_SAMPLES = 4096
MAX_HELD_SAMPLES = 32768
MAX_COMPLETION_BYTES = 1 << 20
# Sessions (/v1/sessions) held at once: each is a container, held for minutes.
MAX_SESSIONS = 64


class ServerSettings(BaseModel):
    """The service's own limits; the sandbox's are in `Limits`. `rewardbox
    serve` makes them from the settings (`rewardbox.settings.server_settings`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_completion_bytes: int = Field(MAX_COMPLETION_BYTES, ge=1, description="a completion over this is refused (413)")
    max_waiting_samples: int = Field(MAX_WAITING_SAMPLES, ge=1, description="samples in the sandbox at once (running or queued "
                                     "for a container); more wait in line, in arrival order")
    max_held_samples: int = Field(MAX_HELD_SAMPLES, ge=1, description="samples waiting in line; beyond, a request is refused "
                                  "at once (503; 504 on /run_code): a bound on memory, not on patience")
    hold_s: float = Field(170.0, gt=0, description="a /get_reward or /v1/rewards request waits this long at most, "
                          "then 503 while its samples keep their place for the retry; under the 180 s per attempt "
                          "of OpenRLHF's client (0.8.11-0.11.2)")
    run_code_margin_s: float = Field(3.0, ge=0, description="a /run_code request still waiting this long before "
                                     "verl's own timeout (compile_timeout + run_timeout + 10 s) is answered 504")
    keep_s: float = Field(30.0, gt=0, description="work whose requests were answered 503/504 keeps its place (or "
                          "its answer) this long for their retry; then it leaves the line unrun")
    retry_after_s: int = Field(5, ge=1, description="the Retry-After of a 503 or 504")
    default_reward: str = Field("correctness", description="registered reward or mix when a request names none")
    max_sessions: int = Field(MAX_SESSIONS, ge=1, description="sessions (/v1/sessions) open at once; one more is "
                              "refused (429) until one is closed or expires")
    session_idle_s: float = Field(300.0, gt=0, description="a session no call came for this long is closed; the "
                                  "default and the most a session may ask for")
    session_lifetime_s: float = Field(3600.0, gt=0, description="a session's container ends this long after it "
                                      "started; the default and the most a session may ask for")
    warm_sessions: int = Field(0, ge=0, description="session containers made ahead, so that a POST /v1/sessions "
                               "with the service's limits gets one at once (sandbox/session_warm.py); 0: none")
    run_code: RunCodeSettings = Field(default_factory=RunCodeSettings, description="limits of /run_code (SandboxFusion)")
