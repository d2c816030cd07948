// The reference's GEMM in fp64: y[r, j] = sum_k x[r, k] w[j, k]. Blocked and spread over the
// cores, so the reference of a full-size MLP takes seconds, not minutes (a row-by-row loop
// streams all of w from memory once per row).
#pragma once

#include <cstdint>

namespace mlpc::runtime {

// x [rows, k], w [n, k] (row-major, as nn.Linear stores it), y [rows, n] (overwritten).
void reference_gemm(const double* x, const double* w, double* y, int64_t rows, int64_t k,
                    int64_t n);

}  // namespace mlpc::runtime
