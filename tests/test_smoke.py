"""The foundation serves: the LM's ASGI app answers on a real socket."""

import httpx


def test_it_answers_405_to_get_on_mcp(lm_server):
    # A placeholder until the /mcp view lands: the admin login page proves the stack serves.
    base = lm_server.rsplit("/mcp", 1)[0]
    response = httpx.get(base + "/admin/login/")
    assert response.status_code == 200
