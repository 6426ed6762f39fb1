"""One API per path prefix: {prefix}/api/ with that prefix's list shape."""

from django.urls import include, path

from . import api

PREFIXES = {
    "page": dict(paginator=api.PageNumber),
    "limit": dict(paginator=api.LimitOffset),
    "cursor": dict(paginator=api.Cursor),
    "header": dict(paginator=api.LinkHeader),
    "plain": dict(paginator=None),
    "hyperlinked": dict(paginator=api.PageNumber, hyperlinked=True),
    "hyperlinked-cursor": dict(paginator=api.Cursor, hyperlinked=True),
    "throttled": dict(paginator=api.PageNumber, throttled=True),
}

urlpatterns = [
    path(f"{prefix}/api/", include((api.api_urls(prefix, **options), prefix)))
    for prefix, options in PREFIXES.items()
]
