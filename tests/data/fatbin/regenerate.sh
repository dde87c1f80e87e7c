#!/usr/bin/env bash
# Regenerates the fatbin fixtures of tests/unit/fatbin_test.cpp from kernel.cu (nvcc 13.0 made the
# committed ones; the tests read their headers, not exact bytes, except where they compare the
# decompressed cubins of plain/lz/zstd, which come from one compile each).
set -euo pipefail
cd "$(dirname "$0")"
sm90="-gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90"
nvcc -fatbin $sm90 --compress-mode=none -o plain.fatbin kernel.cu
nvcc -fatbin $sm90 -Xfatbin -compress-all --compress-mode=speed -o lz.fatbin kernel.cu
nvcc -fatbin $sm90 -Xfatbin -compress-all --compress-mode=size -o zstd.fatbin kernel.cu
nvcc -fatbin -gencode arch=compute_90,code=sm_90 -gencode arch=compute_120,code=sm_120 \
  -gencode arch=compute_120,code=compute_120 -o multi.fatbin kernel.cu
nvcc -fatbin -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_100f,code=sm_100f \
  -gencode arch=compute_100a,code=compute_100a -gencode arch=compute_120f,code=compute_120f \
  -gencode arch=compute_75,code=compute_75 -o variants.fatbin kernel.cu
# A host object: the fatbin inside an ELF file's .nv_fatbin section, as in extension modules.
nvcc -c -gencode arch=compute_90,code=sm_90 -gencode arch=compute_120,code=compute_120 -o kernel.o kernel.cu
