"""Fills the database and writes what the test must find to a JSON file.

The expected figures are read back from the database after seeding, so the
test compares the exporter's numbers with the service's own truth.
"""

import datetime
import json
import os
import random

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand
from rest_framework.authtoken.models import Token

from deployments.models import Location, Project

# The key holder's share is 2,276 locations over 7 projects; another user's
# 300 locations are interleaved with them, so the key holder's ids have gaps
# and its list must be filtered.
OWN_PROJECTS, OWN_LOCATIONS = 7, 2276
OTHER_PROJECTS, OTHER_LOCATIONS = 3, 300

WORDS = ["Amber", "Birch", "Cedar", "Delta", "Ember", "Fjord", "Granite", "Harbor"]
REGIONS = ["eu-west", "eu-central", "us-east", "ap-south"]
# Label values must survive escaping: quotes, a backslash, non-ASCII.
TRICKY_NAME = 'Zürich "Nord" \\ edge'


class Command(BaseCommand):
    help = "Seed users, tokens, projects and locations; write the facts to FILE."

    def add_arguments(self, parser):
        parser.add_argument("facts_file")

    def handle(self, *args, facts_file, **options):
        rng = random.Random(8)
        owner = User.objects.create_user("ops")
        other = User.objects.create_user("other")
        former = User.objects.create_user("former", is_active=False)

        own = [Project.objects.create(name=f"ops-{i}", owner=owner) for i in range(OWN_PROJECTS)]
        foreign = [
            Project.objects.create(name=f"other-{i}", owner=other) for i in range(OTHER_PROJECTS)
        ]
        projects = [rng.choice(own) for _ in range(OWN_LOCATIONS)]
        projects += [rng.choice(foreign) for _ in range(OTHER_LOCATIONS)]
        rng.shuffle(projects)

        start = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
        locations = []
        for i, project in enumerate(projects):
            name = f"{rng.choice(WORDS)} {rng.choice(WORDS)} {i}"
            locations.append(
                Location(
                    project=project,
                    name=name,
                    region=rng.choice(REGIONS),
                    status=rng.choice(["active", "active", "active", "draining"]),
                    description=f"{name}: serves {project.name}.",
                    created=start + datetime.timedelta(minutes=i),
                )
            )
        Location.objects.bulk_create(locations)

        visible = Location.objects.filter(project__owner=owner).order_by("id")
        second = visible[1]
        second.name = TRICKY_NAME
        second.save()

        facts = {
            "key": Token.objects.create(user=owner).key,
            "inactive_key": Token.objects.create(user=former).key,
            "projects": Project.objects.filter(owner=owner).count(),
            "locations": visible.count(),
            "first_locations": [{"id": loc.id, "name": loc.name} for loc in visible[:5]],
            "hidden_location": Location.objects.filter(project__owner=other)
            .order_by("id")
            .first()
            .id,
        }
        # The file holds keys: readable by its owner only.
        fd = os.open(facts_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(facts, f)
        self.stdout.write(
            f"seeded {facts['projects']} projects and {facts['locations']} locations "
            f"for the key holder, {OTHER_LOCATIONS} hidden ones"
        )
