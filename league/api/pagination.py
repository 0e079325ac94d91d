"""The API's pages: DRF's limit/offset pagination with bounds on both numbers."""

from __future__ import annotations

from rest_framework.pagination import LimitOffsetPagination

# Past this no table has rows; a larger integer (past 64 bits) is an error in the database itself.
MAX_OFFSET = 2**31 - 1


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    """A ``limit`` past ``max_limit`` gives ``max_limit`` rows and an ``offset`` past
    ``MAX_OFFSET`` an empty page, as any offset past the last row does: neither reaches the
    database as a number it cannot take (``?limit=`` with 39 digits was a 500)."""

    max_limit = 1000

    def get_offset(self, request) -> int:
        return min(super().get_offset(request), MAX_OFFSET)
