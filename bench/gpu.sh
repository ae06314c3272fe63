#!/usr/bin/env bash
# Every GPU check in one command (bench/gpu.py) on a machine that has PyTorch, transformers and CUDA but not
# necessarily the rest of what the trainer imports (a bare PyTorch image lacks pydantic, for one).
#
#   bash bench/gpu.sh --fetch-wheels DIR [PYTHON_VERSION]   where pip reaches PyPI: download the wheels of what
#                                                            such an image lacks, for its Python (default 3.12), x86-64
#   bash bench/gpu.sh [--wheels DIR] [bench/gpu.py's options, e.g. --out DIR, --stage gpt, --dry-run]
#
# With --wheels, the packages the trainer imports and this Python lacks are installed from DIR alone (no index)
# into a folder of their own under /tmp, put first on PYTHONPATH for this run only: nothing else changes.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
# What training/ and kubetrain_runtime/ import beyond torch and the standard library, by pip name.
packages=(pydantic pydantic-core annotated-types typing-inspection typing-extensions pyyaml numpy prometheus-client
          safetensors tokenizers transformers)

if [ "${1:-}" = "--fetch-wheels" ]; then
    [ -n "${2:-}" ] || { echo "usage: bash bench/gpu.sh --fetch-wheels DIR [PYTHON_VERSION]" >&2; exit 2; }
    # The versions installed here, so that the bench runs what the tests ran.
    pins=$("$python" -m pip list --format=freeze 2>/dev/null | grep -i -E "^($(IFS='|'; echo "${packages[*]}" | sed 's/-/[-_]/g'))==" || true)
    # shellcheck disable=SC2086
    "$python" -m pip download --no-deps --only-binary=:all: --python-version "${3:-3.12}" --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform any -d "$2" $pins
    exit 0
fi

if [ "${1:-}" = "--wheels" ]; then
    [ -d "${2:-}" ] || { echo "bench/gpu.sh: --wheels needs a folder of wheels (bash bench/gpu.sh --fetch-wheels DIR)" >&2; exit 2; }
    wheels=$2
    shift 2
    missing=$("$python" - <<'PY'
import importlib.util
modules = {"pydantic": "pydantic", "pydantic_core": "pydantic-core", "annotated_types": "annotated-types",
           "typing_inspection": "typing-inspection", "typing_extensions": "typing-extensions", "yaml": "pyyaml",
           "numpy": "numpy", "prometheus_client": "prometheus-client", "safetensors": "safetensors",
           "tokenizers": "tokenizers", "transformers": "transformers"}
print(" ".join(name for module, name in modules.items() if importlib.util.find_spec(module) is None))
PY
)
    if [ -n "$missing" ]; then
        site=/tmp/kubetrain-bench-site
        files=()
        for name in $missing; do
            found=$(ls "$wheels"/"$(echo "$name" | tr - _)"-*.whl 2>/dev/null | head -1)
            [ -n "$found" ] || { echo "bench/gpu.sh: $name is missing here and has no wheel in $wheels" >&2; exit 2; }
            files+=("$found")
        done
        "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "${files[@]}"
        export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
        echo "installed from $wheels into $site: $missing"
    fi
fi
exec "$python" bench/gpu.py "$@"
