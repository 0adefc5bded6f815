# The one ferryman image: `ferryman operator`, `ferryman worker`, `ferryman reap` and
# `ferryman db migrate` all run from it (the chart picks the command).
#
# Here (no registry): hack/image builds a Debian base with mmdebstrap and builds this file on it.
# With Docker:        docker build -t ferryman:dev .   (BASE defaults to Debian's public image)
#
# Python is Debian bookworm's 3.11 in both cases. The build stage makes a venv from the wheel
# (never the source tree); the runtime stage gets that venv and python3, nothing else: no pip, no
# compilers (none are ever installed: every dependency ships a manylinux wheel).
ARG BASE=docker.io/library/debian:bookworm-slim

FROM ${BASE} AS build
ENV DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && python3 -m venv /opt/ferryman \
 && python3 -m venv /opt/build
# The dependency set first, from uv.lock (hack/lock writes it from pyproject.toml): the versions
# make test ran with, hash-checked; this layer is rebuilt only when the lock changes. uv (at the
# version the lock pins) only exports the operator's and worker's part of the lock; pip installs it.
# The optional secret `ca-bundle` is the build host's CA bundle, for hosts whose HTTPS to PyPI goes
# through an intercepting proxy (hack/image passes it); without it pip uses its own.
COPY pyproject.toml uv.lock /src/
RUN --mount=type=secret,id=ca-bundle \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi \
 && uv=$(python3 -c 'import tomllib; l = tomllib.load(open("/src/uv.lock", "rb")); \
print(next(p["version"] for p in l["package"] if p["name"] == "uv"))') \
 && /opt/build/bin/pip install --only-binary=:all: hatchling "uv==$uv" \
 && /opt/build/bin/uv export --project /src --frozen --extra operator --no-emit-project \
        --no-header --format requirements-txt --output-file /src/requirements.txt \
 && /opt/ferryman/bin/pip install --only-binary=:all: --no-deps --require-hashes \
        -r /src/requirements.txt
# Then the code: a wheel built from it, installed without touching the dependencies.
COPY README.md /src/README.md
COPY worker /src/worker
COPY operator /src/operator
# kubernetes/aio is the client's asyncio copy (68 MB): kopf brings its own aiohttp calls and the
# operator uses the synchronous client. pip and setuptools are not needed at run time.
RUN /opt/build/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /dist /src \
 && /opt/ferryman/bin/pip install --no-deps --no-index /dist/ferryman-*.whl \
 && /opt/ferryman/bin/pip check \
 && /opt/ferryman/bin/pip uninstall -y pip setuptools \
 && rm -rf /opt/ferryman/lib/python3.11/site-packages/kubernetes/aio \
 && /opt/ferryman/bin/python -c "import kopf, kubernetes.client, kubernetes.config, psycopg, \
ferryman_worker.cli, ferryman_operator" \
 && /opt/ferryman/bin/ferryman --version

FROM ${BASE}
ARG VERSION=dev
LABEL org.opencontainers.image.title="ferryman" \
      org.opencontainers.image.description="Moves a SaaS source's data into PostgreSQL, exactly once: operator, worker, reaper and migrations." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/ferryman-dev/ferryman"
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 ca-certificates \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log \
 && groupadd --gid 10001 ferryman \
 && useradd --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home \
        --shell /usr/sbin/nologin ferryman
COPY --from=build /opt/ferryman /opt/ferryman
# PYTHONSAFEPATH: never put the working directory on sys.path (the `operator` name guard).
# No .pyc writes at run time: the root filesystem is read-only in the chart (pip compiled them).
ENV PATH=/opt/ferryman/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONSAFEPATH=1 PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 10001:10001
WORKDIR /tmp
ENTRYPOINT ["/opt/ferryman/bin/ferryman"]
CMD ["--help"]
