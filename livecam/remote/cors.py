"""CORS for the WHIP endpoint: browsers' WHIP clients (a page's JavaScript) may post offers
and read the answer's Location; the token, not the origin, lets an offer in."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from aiohttp import web

#: Browsers' WHIP clients post from their page's origin: any origin may ask (the token, not
#: the origin, is what lets an offer in), and may read the Location of the answer.
_CORS = {"Access-Control-Allow-Origin": "*",
         "Access-Control-Allow-Methods": "GET, POST, DELETE, OPTIONS",
         "Access-Control-Allow-Headers": "Authorization, Content-Type",
         "Access-Control-Expose-Headers": "Location"}


@web.middleware
async def cors(request: web.Request, handler: Any) -> web.StreamResponse:
    try:
        response: web.StreamResponse = await handler(request)
    except web.HTTPException as exc:
        exc.headers.update(_CORS)
        raise
    response.headers.update(_CORS)
    return response


async def preflight(request: web.Request) -> web.Response:
    """A browser's CORS preflight: answered without a token (it carries none)."""
    return web.Response(status=HTTPStatus.NO_CONTENT)
