"""The deployment service's API, built once per URL prefix.

Every prefix serves the same projects and locations under {prefix}/api/,
each with another of the shapes DRF services answer lists in: page number,
limit/offset, cursor or Link-header pagination, a plain array, hyperlinked
entries, or a tight throttle.
"""

from rest_framework import pagination, routers, serializers, throttling, viewsets
from rest_framework.response import Response

from .models import Location, Project


class PageNumber(pagination.PageNumberPagination):
    page_size = 100


class LimitOffset(pagination.LimitOffsetPagination):
    default_limit = 100


class Cursor(pagination.CursorPagination):
    """Cursor pagination answers no count: a client must walk every page."""

    page_size = 100
    ordering = "id"


class LinkHeader(pagination.PageNumberPagination):
    """A plain array per page, the next and previous pages in a Link header:
    the header-based pagination of DRF's documentation."""

    page_size = 100

    def get_paginated_response(self, data):
        links = [
            f'<{url}>; rel="{rel}"'
            for url, rel in ((self.get_next_link(), "next"), (self.get_previous_link(), "prev"))
            if url
        ]
        headers = {"Link": ", ".join(links)} if links else None
        return Response(data, headers=headers)


class Tight(throttling.UserRateThrottle):
    """Two requests a minute per user, so a poll is throttled and DRF answers
    429 with Retry-After."""

    rate = "2/minute"


class ProjectSerializer(serializers.ModelSerializer):
    class Meta:
        model = Project
        fields = ["id", "name"]


class LocationListSerializer(serializers.ModelSerializer):
    """List entries carry less than the detail view."""

    class Meta:
        model = Location
        fields = ["id", "name", "project"]


class LocationDetailSerializer(serializers.ModelSerializer):
    class Meta:
        model = Location
        fields = ["id", "name", "project", "region", "status", "description", "created"]


def hyperlinked_serializer(namespace):
    """Entries carrying url instead of id, as HyperlinkedModelSerializer
    makes them (the DRF tutorial's serializer)."""

    class LocationHyperlinked(serializers.HyperlinkedModelSerializer):
        class Meta:
            model = Location
            fields = ["url", "name", "region"]
            extra_kwargs = {"url": {"view_name": f"{namespace}:location-detail"}}

    return LocationHyperlinked


def api_urls(namespace, paginator=None, hyperlinked=False, throttled=False):
    """URL patterns of one API: its root, the projects and the locations."""

    throttles = [Tight] if throttled else []

    class Projects(viewsets.ReadOnlyModelViewSet):
        serializer_class = ProjectSerializer
        pagination_class = paginator
        throttle_classes = throttles

        def get_queryset(self):
            return Project.objects.filter(owner=self.request.user).order_by("id")

    class Locations(viewsets.ReadOnlyModelViewSet):
        pagination_class = paginator
        throttle_classes = throttles

        def get_queryset(self):
            return (
                Location.objects.filter(project__owner=self.request.user)
                .order_by("id")
            )

        def get_serializer_class(self):
            if hyperlinked:
                return hyperlinked_serializer(namespace)
            if self.action == "list":
                return LocationListSerializer
            return LocationDetailSerializer

    class Root(routers.APIRootView):
        throttle_classes = throttles

    router = routers.DefaultRouter()
    router.APIRootView = Root
    router.register("projects/projects", Projects, basename="project")
    router.register("projects/locations", Locations, basename="location")
    return router.urls
