"""What the GCP stand-ins (gcp_server.py, gcp_network.py) share: Google's
error answer and its time format."""

import time
from datetime import datetime, timezone


def now_text(at=None):
    return datetime.fromtimestamp(at or time.time(), timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class GoogleError(Exception):
    def __init__(self, code, status, reason, message):
        super().__init__(message)
        self.code, self.status, self.reason, self.message = code, status, reason, message

    def body(self):
        return {"error": {"code": self.code, "message": self.message, "status": self.status,
                          "errors": [{"domain": "global", "reason": self.reason, "message": self.message}]}}


def invalid(message):
    return GoogleError(400, "INVALID_ARGUMENT", "invalid", message)
