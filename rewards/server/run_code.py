"""SandboxFusion's `/run_code`, for verl (filled in by the run_code work)."""

from fastapi import APIRouter

router = APIRouter()
