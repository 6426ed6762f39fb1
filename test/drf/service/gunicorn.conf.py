"""gunicorn settings of the test deployment service (the bind address comes
from the command line)."""

wsgi_app = "deployments.wsgi:application"
workers = 2
threads = 4
# One access log line per request, tab-separated, for the test to read:
# method, path, query, status, bytes sent, the request's Accept-Encoding,
# the response's Content-Encoding, User-Agent. Never the Authorization header.
access_log_format = "\t".join(
    [
        "%(m)s",
        "%(U)s",
        "%(q)s",
        "%(s)s",
        "%(B)s",
        "%({accept-encoding}i)s",
        "%({content-encoding}o)s",
        "%(a)s",
    ]
)

# Stop within a couple of seconds when run.sh ends, idle keep-alive
# connections of the exporters notwithstanding.
graceful_timeout = 2
