"""``livecam ctl stream list|add|remove``: streams added and removed while livecam runs
(``/api/streams``, :mod:`livecam.control.stream_api`)."""

from __future__ import annotations

from livecam.subcommands.ctl_client import TIMEOUT_S, json_reply, request

#: Adding a stream opens its input, models and output before the answer comes.
_ADD_TIMEOUT_S = 120.0


def stream_verb(base: str, token: str, verb: str, operands: list[str]) -> int:
    """``livecam ctl stream list|add INPUT OUTPUT|remove K`` (see ``/api/streams``)."""
    from livecam.core.errors import UsageError

    url = f"{base}/api/streams"
    wanted = {"list": 0, "add": 2, "remove": 1}[verb]
    if len(operands) != wanted:
        raise UsageError({"list": "stream list takes no arguments",
                          "add": "stream add needs INPUT OUTPUT (e.g. synthetic:640x480 null)",
                          "remove": "stream remove needs the stream id K"}[verb])
    if verb == "list":
        reply = json_reply(request(url, token), url,
                            lambda v: isinstance(v, dict) and isinstance(v.get("streams"), list))
        for b in reply["streams"]:
            print(f"{b['stream']}: {b['input']} -> {b['output']}  fps {b['fps_out'] or 0:.1f}"
                  f"{'  STOPPED' if b.get('stopped') else ''}")
        if not reply["streams"]:
            print("no stream is running")
        return 0
    if verb == "add":
        reply = json_reply(request(url, token, "POST", {"input": operands[0],
                                                          "output": operands[1]},
                                     timeout_s=_ADD_TIMEOUT_S),
                            url, lambda v: isinstance(v, dict) and isinstance(v.get("stream"), int))
        print(reply["stream"])
        return 0
    if not operands[0].isdigit():
        raise UsageError(f"stream remove {operands[0]!r}: give the stream's id (a whole number, "
                         "see `livecam ctl stream list`)")
    url = f"{url}/{int(operands[0])}"
    reply = json_reply(request(url, token, "DELETE", timeout_s=TIMEOUT_S + 5), url,
                        lambda v: isinstance(v, dict) and v.get("removed") is True)
    print(f"stream {reply['stream']} removed: {reply.get('summary', '')}")
    return 0
