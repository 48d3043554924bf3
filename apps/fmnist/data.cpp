// SPDX-License-Identifier: Apache-2.0
#include "apps/fmnist/data.hpp"

#include <cerrno>
#include <cstring>
#include <sys/stat.h>

#include <zlib.h>

namespace monkey::fmnist {

namespace {

/// The whole (decompressed) content of `path`; gzopen reads plain files too.
expected<std::vector<uint8_t>> read_all(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return failure{path + ": " + std::strerror(errno)};
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f)
    return failure{path + ": cannot open it"};
  std::vector<uint8_t> out;
  std::vector<uint8_t> buf(1 << 20);
  for (;;) {
    int n = gzread(f, buf.data(), static_cast<unsigned>(buf.size()));
    if (n < 0) {
      int code = 0;
      std::string why = gzerror(f, &code);
      gzclose(f);
      return failure{path + ": not a readable gzip file (" + why + ")"};
    }
    if (n == 0)
      break;
    out.insert(out.end(), buf.begin(), buf.begin() + n);
  }
  // A gzip stream cut short reads as a clean end with Z_BUF_ERROR pending.
  int code = 0;
  const char* why = gzerror(f, &code);
  std::string what = why ? why : "";
  gzclose(f);
  if (code != Z_OK && code != Z_STREAM_END)
    return failure{path + ": the gzip stream is truncated or corrupt (" + what + ")"};
  return out;
}

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

} // namespace

expected<dataset> load_idx(const std::string& images_path, const std::string& labels_path) {
  auto img = read_all(images_path);
  if (!img)
    return failure{img.error()};
  auto lab = read_all(labels_path);
  if (!lab)
    return failure{lab.error()};
  if (img->size() < 16 || be32(img->data()) != 0x00000803)
    return failure{images_path + ": not an IDX image file (its magic number is not 0x00000803)"};
  if (lab->size() < 8 || be32(lab->data()) != 0x00000801)
    return failure{labels_path + ": not an IDX label file (its magic number is not 0x00000801)"};
  uint64_t n = be32(img->data() + 4), rows = be32(img->data() + 8), cols = be32(img->data() + 12);
  uint64_t nl = be32(lab->data() + 4);
  if (n != nl)
    return failure{images_path + " holds " + std::to_string(n) + " images but " + labels_path
                   + " " + std::to_string(nl) + " labels"};
  if (rows * cols != static_cast<uint64_t>(image_pixels))
    return failure{images_path + ": images of " + std::to_string(rows) + "×" + std::to_string(cols)
                   + " pixels, not 28×28"};
  if (img->size() != 16 + n * rows * cols)
    return failure{images_path + ": " + std::to_string(img->size() - 16) + " bytes of pixels for "
                   + std::to_string(n) + " images of " + std::to_string(rows * cols)
                   + " (truncated or padded)"};
  if (lab->size() != 8 + n)
    return failure{labels_path + ": " + std::to_string(lab->size() - 8) + " labels for "
                   + std::to_string(n) + " images (truncated or padded)"};
  dataset d;
  d.count = static_cast<int32_t>(n);
  d.pixels = static_cast<int32_t>(rows * cols);
  d.images.assign(img->begin() + 16, img->end());
  d.labels.resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    auto l = (*lab)[8 + i];
    if (l >= classes)
      return failure{labels_path + ": label " + std::to_string(l) + " of image " + std::to_string(i)
                     + " is not a class (0-9)"};
    d.labels[i] = l;
  }
  return d;
}

expected<dataset> load_split(const std::string& dir, const std::string& split) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    return failure{"the Fashion-MNIST files are not in " + dir
                   + " (install the Debian package dataset-fashion-mnist: bash scripts/setup)"};
  return load_idx(dir + "/" + split + "-images-idx3-ubyte.gz",
                  dir + "/" + split + "-labels-idx1-ubyte.gz");
}

void gather(const dataset& d, const uint32_t* idx, int rows, float* out, int32_t* labels) {
  const float k = 1.0f / 255.0f;
  for (int r = 0; r < rows; ++r) {
    const uint8_t* src = d.images.data() + static_cast<size_t>(idx[r]) * static_cast<size_t>(d.pixels);
    float* dst = out + static_cast<size_t>(r) * static_cast<size_t>(d.pixels);
    for (int p = 0; p < d.pixels; ++p)
      dst[p] = static_cast<float>(src[p]) * k;
    labels[r] = d.labels[idx[r]];
  }
}

std::vector<uint32_t> epoch_order(int32_t count, uint64_t seed, int64_t epoch) {
  std::vector<uint32_t> order(static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i)
    order[static_cast<size_t>(i)] = static_cast<uint32_t>(i);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch) * 0xD1B54A32D192ED03ull;
  for (size_t i = order.size(); i > 1; --i) {
    // Unbiased enough for i < 2^32: a 64-bit draw reduced by multiplication.
    auto j = static_cast<size_t>((static_cast<unsigned __int128>(splitmix64(s)) * i) >> 64);
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

} // namespace monkey::fmnist
