#!/usr/bin/env bash
# The interpreter `make sync` gives the project's venv (.venv), printed for UV_PYTHON; nothing printed: uv's own
# choice. It is the Python version uv picks, in the machine's own build of it (/usr/bin/pythonX.Y) when uv would
# take another build of that same version (pyenv's, say): Linux distributions build their CPython with
# profile-guided and link-time optimization, and pyenv does not unless asked to. Every pulumi command of the tests
# runs several Python processes, so the whole suite is bound by it (measured on these machines, Debian's 3.11 against
# pyenv's 3.11.7: `import pulumi, httpx, pydantic` 0.33 s of CPU against 0.54 s; a CLI test about a fifth less CPU).
# A UV_PYTHON of the user's own is kept, and another version is never chosen (the tests run on the one uv picks).
set -uo pipefail
[ -z "${UV_PYTHON:-}" ] || exit 0
read -r -a UV <<<"${UV:-uv}"
picked="$("${UV[@]}" python find --system 2>/dev/null)" || exit 0
version="$("$picked" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" || exit 0
own="/usr/bin/python$version"
[ -x "$own" ] && [ "$(readlink -f "$own")" != "$(readlink -f "$picked")" ] || exit 0
# The same version, and one that runs (a distribution may ship the binary without parts a venv needs).
[ "$("$own" -c 'import sys, sysconfig, ssl, sqlite3; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "$version" ] || exit 0
echo "$own"
