#!/usr/bin/env bash
# StochasticMRD on one GPU, as one call on a lent GPU machine (its image has torch and GPyTorch; pyro-ppl,
# pyro-api and POT travel as wheels in .whl/, as for benchmarks/device_check.sh). Run from the repo root:
#   bash benchmarks/bench_svi_gpu.sh            # logs under $OUT (or ./device-logs); about 5 minutes in all
# 1. the CUDA tests of the SVI engine's step (tests/test_svi_cuda.py: CUDA against CPU);
# 2. benchmarks/bench_svi_gpu.py at 100,000 rows per view: seconds per epoch, peak GPU memory, ELBO, FOSCTTM.
# On a machine without a GPU: ROWS=5000 EPOCHS=3 DEVICE=cpu bash benchmarks/bench_svi_gpu.sh
set -u
OUT=${OUT:-device-logs}; mkdir -p "$OUT"
ROWS=${ROWS:-100000}; EPOCHS=${EPOCHS:-20}; DEVICE=${DEVICE:-cuda}
export PYTHONUNBUFFERED=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
python3 -c "import torch, gpytorch, pyro; print('torch', torch.__version__, 'gpytorch', gpytorch.__version__, 'pyro', pyro.__version__, 'cuda', torch.cuda.is_available())"
timeout 120 python3 -m pytest -q -p no:cacheprovider -o addopts="" -rs tests/test_svi_cuda.py 2>&1 | tee "$OUT/pytest_svi_cuda.log" | tail -8
timeout 240 python3 benchmarks/bench_svi_gpu.py --device "$DEVICE" --rows "$ROWS" --epochs "$EPOCHS" 2>&1 | tee "$OUT/bench_svi_gpu.log"
