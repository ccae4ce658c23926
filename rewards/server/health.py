"""`/healthz` and `/metrics` (filled in by the health and metrics work)."""

from fastapi import APIRouter

router = APIRouter()
