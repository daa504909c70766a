"""The whole pipeline remote: ``livecam serve`` takes cameras over WebRTC (WHIP, RFC 9725, on
aiortc) and sends each its swapped video back on the same transceiver; every session is a
stream of the process's one pipeline, added and removed while it runs
(:meth:`livecam.pipeline.streams.StreamSet.add_stream`)."""
