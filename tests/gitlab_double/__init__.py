"""A GitLab REST API test double on the loopback interface (see server.py)."""
from .server import Call, GitLabDouble

__all__ = ["Call", "GitLabDouble"]
