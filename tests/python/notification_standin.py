"""A stand-in for a desktop's notification service (org.freedesktop.Notifications) on a
test session bus: each Notify call is appended to a file as one JSON line. Run as
`python notification_standin.py OUT_FILE` with DBUS_SESSION_BUS_ADDRESS set; it prints
`ready` once it owns the name."""

from __future__ import annotations

import asyncio
import json
import sys

from dbus_next.aio import MessageBus
from dbus_next.service import ServiceInterface, method


class Notifications(ServiceInterface):
    def __init__(self, out: str) -> None:
        super().__init__("org.freedesktop.Notifications")
        self.out = out
        self.next_id = 0

    @method()
    def Notify(self, app_name: "s", replaces_id: "u", app_icon: "s", summary: "s",  # noqa: F821,N802
               body: "s", actions: "as", hints: "a{sv}", expire_timeout: "i") -> "u":  # noqa: F821
        self.next_id += 1
        with open(self.out, "a") as f:
            f.write(json.dumps({"app_name": app_name, "summary": summary, "body": body,
                                "expire_timeout": expire_timeout, "actions": actions}) + "\n")
        return self.next_id

    @method()
    def GetServerInformation(self) -> "ssss":  # noqa: F821,N802
        return ["standin", "ringfence tests", "1.0", "1.2"]

    @method()
    def GetCapabilities(self) -> "as":  # noqa: F821,N802
        return ["body"]


async def main(out: str) -> None:
    bus = await MessageBus().connect()
    bus.export("/org/freedesktop/Notifications", Notifications(out))
    await bus.request_name("org.freedesktop.Notifications")
    print("ready", flush=True)
    await bus.wait_for_disconnect()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
