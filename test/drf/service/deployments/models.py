"""Projects and their locations; a user sees only the projects it owns."""

from django.conf import settings
from django.db import models


class Project(models.Model):
    name = models.CharField(max_length=100)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)


class Location(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE)
    name = models.CharField(max_length=200)
    region = models.CharField(max_length=50)
    status = models.CharField(max_length=20)
    description = models.TextField()
    created = models.DateTimeField()
