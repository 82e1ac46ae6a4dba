// NumPy .npy files in and out: the exchange format for CLI outputs and the Python parity fixtures.
// Only plain little-endian C-order arrays of a few dtypes; anything else is rejected with a reason.
#pragma once

#include <string>
#include <vector>

#include <torch/types.h>

namespace attnscope {

// Reads a .npy file (format versions 1.0, 2.0 and 3.0) into a CPU tensor of the stored dtype:
// '<f4' float32, '<f8' float64, '|u1' uint8, '<i4' int32, '<i8' int64.
// Throws std::runtime_error naming the file and the problem (bad magic, malformed header,
// unsupported dtype, Fortran order, data size not matching the shape).
torch::Tensor read_npy(const std::string& path);

// Writes `tensor` (any device, any layout) as a C-order .npy file, version 1.0 unless the header
// needs more room. Supported dtypes: float32, float64, uint8, int32, int64. The data goes to a
// temporary file in the same folder that is renamed over `path` only once complete, so a reader
// never sees a half-written file. Throws std::runtime_error on an unsupported dtype or I/O failure.
void write_npy(const std::string& path, const torch::Tensor& tensor);

// The bytes write_npy would write (for callers that compare with or bundle existing files).
std::string npy_bytes(const torch::Tensor& tensor);

// The bytes before the data of a C-order array of `shape` and `dtype` (what npy_bytes starts
// with), for a writer that streams the data after it in pieces.
std::string npy_header(const std::vector<int64_t>& shape, torch::ScalarType dtype);

}  // namespace attnscope
