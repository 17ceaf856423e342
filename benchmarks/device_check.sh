#!/usr/bin/env bash
# The CUDA check of the Bayesian core, as one call on a lent GPU machine (its image has torch and GPyTorch;
# pyro-ppl, pyro-api and POT travel as wheels in .whl/, see the device tool's README). Run from the repo root:
#   bash benchmarks/device_check.sh          # logs under $OUT (or ./device-logs)
# 1. the tests that skip without CUDA (BayesianGPLVM, inference, MRD, StochasticMRD, MAD and its pool on cuda against cpu);
# 2. MAD (all rows, centred, MAD's defaults) on mfeat fou-kar at 2000 rows, 10% anchors, draw 0, on cuda and on
#    the same machine's CPU, one after the other: the seconds and FOSCTTM of each;
# 3. StochasticMRD at 100,000 rows per view (benchmarks/bench_svi_gpu.py; ROWS, EPOCHS to change): seconds per
#    epoch, peak GPU memory, ELBO, FOSCTTM.
set -u
OUT=${OUT:-device-logs}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, gpytorch, pyro, ot; print('torch', torch.__version__, 'gpytorch', gpytorch.__version__, 'pyro', pyro.__version__, 'cuda', torch.cuda.is_available(), 'cpu threads', torch.get_num_threads())"
timeout 200 python3 -m pytest -q -p no:cacheprovider -o addopts="" -rs tests/test_bgplvm.py tests/test_inference.py \
  tests/test_mrd.py tests/test_mad_all_rows.py tests/test_svi_cuda.py -k cuda 2>&1 | tee "$OUT/pytest.log" | tail -25
for device in cuda cpu; do
  echo "== MAD on $device"
  timeout 170 python3 benchmarks/bench_mad_real.py --pairs "mfeat fou-kar" --seeds 0 --variants "all rows, centred)" \
    --device $device 2>&1 | tee "$OUT/bench_$device.log" | grep -E "MAD|best baseline" | head -4
done
timeout 240 python3 benchmarks/bench_svi_gpu.py --device cuda --rows "${ROWS:-100000}" --epochs "${EPOCHS:-20}" 2>&1 \
  | tee "$OUT/bench_svi_gpu.log"
