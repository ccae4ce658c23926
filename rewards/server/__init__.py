"""The reward service over HTTP: `rewardbox serve`."""

from rewardbox.rewards.server.app import ServerSettings, Service, create_app

__all__ = ["ServerSettings", "Service", "create_app"]
