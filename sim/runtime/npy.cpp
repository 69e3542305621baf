#include "sim/runtime/npy.hpp"


#include "sim/core/error.hpp"
#include "sim/os/output_file.hpp"

namespace cpsim {

void write_npy(const std::string& path, const std::vector<double>& data, const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  std::string dims;
  for (auto d : shape) {
    n *= d;
    dims += std::to_string(d) + ", ";
  }
  if (n != static_cast<std::int64_t>(data.size())) throw Error("write_npy: shape does not match the data");
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // "2, 3, " -> "2, 3"  (a 1-tuple keeps "5, ")
  std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (" + dims + "), }";
  // The magic (6) + version (2) + header length (2) + header + '\n' is padded with spaces to a multiple of 64.
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  OutputFile f(path);  // complete or absent (output_file.hpp)
  f.write("\x93NUMPY\x01\x00", 8);
  const auto len = static_cast<std::uint16_t>(header.size());
  const char len_bytes[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  f.write(len_bytes, 2);
  f.write(header);
  f.write(data.data(), data.size() * sizeof(double));
  f.commit();
}

}  // namespace cpsim
