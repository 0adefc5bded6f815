"""Real source servers nobody here wrote, for the source tests, benchmarks and examples.

    build [pocketbase|json-server]
            build PocketBase (go build of hack/sources/pocketbase at its pinned module version) and
            install json-server (npm ci of hack/sources/json-server's lock file) into the cache
    up pocketbase|json-server [--seed N] [--organizations N] [--rate-limit REQUESTS/SECONDS]
            build if needed, seed (cached per seed and size), start on a free 127.0.0.1 port with
            its data in --state-dir; print the server's URL, pid, tokens and record counts as JSON
    down    stop the server `up` started in --state-dir (by pid) and remove that directory

The cache is $FERRYMAN_CACHE_DIR/sources, else $XDG_CACHE_HOME/ferryman/sources, else
~/.cache/ferryman/sources. The state directory defaults to .state/sources/<server> in the
repository.
"""
