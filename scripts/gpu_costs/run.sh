#!/bin/bash
# Verify costs on a GPU, measured with llama.cpp itself (CUDA), for the demo pair's shapes.
#
# The models are too large to send to a lent GPU machine (its working tree travels at 64 MiB at
# most), so they travel as skeletons: their metadata and tensor list, without weights
# (skeleton.py), from which make_gguf.py writes copies whose weights are all zero there. A pass
# costs the same whatever the weights hold. Prepare here, in the repository root (.devgpu is
# ignored; llama.cpp's sources are never committed):
#
#   echo /.devgpu/ >> .git/info/exclude; mkdir -p .devgpu
#   (cd ~/.cache/tandem/llama-tools/0.3.36/llama_cpp_python-0.3.36/vendor/llama.cpp &&
#    tar -cJf $OLDPWD/.devgpu/llama.tar.xz --exclude=tools/server --exclude=tools/ui --exclude=tools/cli \
#        --exclude='ggml/src/ggml-'{sycl,vulkan,opencl,hexagon,metal,et} \
#        CMakeLists.txt cmake ggml src include common vendor tools gguf-py LICENSE)
#   python scripts/gpu_costs/skeleton.py ~/.cache/tandem/models/Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf .devgpu/q15.json
#   python scripts/gpu_costs/skeleton.py ~/.cache/tandem/models/Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf .devgpu/q05.json
#   cp scripts/gpu_costs/make_gguf.py .devgpu/
#
# (the llama.cpp sources come with llama-cpp-python's sdist: scripts/compare_llama_cpp.py says how to
# fetch them), then on the GPU machine, from the repository root, with .devgpu carried and $OUT set:
#
#   bash scripts/gpu_costs/run.sh
#
# It builds llama-bench for CUDA (sm_90, the H100/H200; about 5 minutes on 16 cores), then times
# passes of 1-33 tokens at a depth of 256 (a verify after a prompt) through the target and a single
# pass through the draft, 100 repetitions each, three times. docs/auto-mode.md "Measured on a GPU"
# has what an H200 gave.
D=$PWD/.devgpu
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $OUT/gpu.txt 2>&1
nvcc --version | tail -2 >> $OUT/gpu.txt
mkdir -p /tmp/lc && tar -xJf $D/llama.tar.xz -C /tmp/lc && cd /tmp/lc || exit 1
cmake -S . -B build -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF -DCMAKE_BUILD_TYPE=Release > $OUT/cmake.log 2>&1 \
  || { tail -40 $OUT/cmake.log; exit 1; }
timeout 420 cmake --build build -j16 --target llama-bench > $OUT/build.log 2>&1 &
python3 $D/make_gguf.py $D/q15.json /tmp/q15.gguf /tmp/lc/gguf-py > /dev/null &
python3 $D/make_gguf.py $D/q05.json /tmp/q05.gguf /tmp/lc/gguf-py > /dev/null &
wait
X=build/bin/llama-bench
[ -x $X ] || { tail -40 $OUT/build.log; exit 1; }
cat $OUT/gpu.txt
for k in 1 2 3; do
  $X -m /tmp/q15.gguf -ngl 99 -p 1,2,3,5,9,17,33 -n 0 -d 256 -r 100 -o csv > $OUT/target$k.csv 2>/dev/null
  $X -m /tmp/q05.gguf -ngl 99 -p 1 -n 0 -d 256 -r 100 -o csv > $OUT/draft$k.csv 2>/dev/null
done
python3 - <<'PY'
import csv, glob, os, statistics
out = os.environ["OUT"]
def means(pattern):
    v = {}
    for f in sorted(glob.glob(os.path.join(out, pattern))):
        for r in csv.DictReader(open(f)):
            v.setdefault(int(r["n_prompt"]), []).append(float(r["avg_ns"]) / 1e6)
    return {k: statistics.fmean(x) for k, x in v.items()}
t, d = means("target*.csv"), means("draft*.csv")
print("target ms:", {k: round(x, 3) for k, x in t.items()})
print("x a single pass:", {k: round(x / t[1], 2) for k, x in t.items()})
print("draft step ms:", round(d[1], 3), "=", round(d[1] / t[1], 2), "of a target pass")
PY
