"""Django settings of the test deployment service.

Everything the service writes (the SQLite database, the throttle cache) goes
to DRF_STATE_DIR, a temporary directory made by test/drf/run.sh.
"""

import os

STATE_DIR = os.environ["DRF_STATE_DIR"]

# A test-only service on 127.0.0.1: the secret signs nothing of value here.
SECRET_KEY = "test-only-drf-service"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "rest_framework",
    "rest_framework.authtoken",
    "deployments",
]

# GZipMiddleware compresses a response when the request asks for gzip, as a
# production Django deployment commonly does (or its reverse proxy).
MIDDLEWARE = [
    "django.middleware.gzip.GZipMiddleware",
    "django.middleware.common.CommonMiddleware",
]

ROOT_URLCONF = "deployments.urls"

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.path.join(STATE_DIR, "db.sqlite3"),
    }
}

# DRF keeps its throttle history in the cache; a file cache is shared by all
# gunicorn workers, so the rate holds across them.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
        "LOCATION": os.path.join(STATE_DIR, "cache"),
    }
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
    ],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
}
