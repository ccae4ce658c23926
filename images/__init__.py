"""The sandbox and service images' build contexts (Dockerfiles, the in-container
harness, pinned requirements), shipped in the wheel as package data."""
