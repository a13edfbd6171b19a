// crayon_hf._crayon_cuda: the CUDA batch engine (native/cuda/device_engine.h) for Python.
//
// It takes what crayon_hf._crayon prepares (a TiktokenEngine's piece_tables() and a PieceBatch
// from split_batch) as numpy arrays, so the two extension modules share no C++ types; pieces the
// GPU leaves are handed back to the PieceBatch's encode_reference (the CPU engine). Importing it
// needs no driver: the CUDA runtime is linked statically and looks for one on first use.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cuda/device_engine.h"

namespace py = pybind11;
using crayon::BatchPiece;
using crayon::cuda::DeviceBuffer;
using crayon::cuda::DeviceEngine;

namespace {

// DLPack's C ABI (https://dmlc.github.io/dlpack/latest/c_api.html), the unversioned form that
// torch.from_dlpack, CuPy and JAX accept.
struct DLDevice {
  int32_t device_type;  // kDLCUDA = 2
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // kDLInt = 0, kDLUInt = 1
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};
constexpr int32_t kDLCUDA = 2;

// A one-dimensional array in GPU memory, handed out through DLPack.
struct DeviceArray {
  std::shared_ptr<DeviceBuffer> buffer;
  uint8_t code;  // DLPack type code
  uint8_t bits;
  int64_t length;
};

struct ExportContext {
  std::shared_ptr<DeviceBuffer> keep;
  int64_t shape[1];
  DLManagedTensor tensor;
};

void delete_export(DLManagedTensor* t) { delete static_cast<ExportContext*>(t->manager_ctx); }

py::capsule to_dlpack(const DeviceArray& a) {
  auto* ctx = new ExportContext{a.buffer, {a.length}, {}};
  DLTensor& t = ctx->tensor.dl_tensor;
  t.data = a.buffer->data();
  t.device = DLDevice{kDLCUDA, a.buffer->device()};
  t.ndim = 1;
  t.dtype = DLDataType{a.code, a.bits, 1};
  t.shape = ctx->shape;
  t.strides = nullptr;  // compact
  t.byte_offset = 0;
  ctx->tensor.manager_ctx = ctx;
  ctx->tensor.deleter = delete_export;
  // A capsule nobody consumed (still named "dltensor") frees the tensor itself.
  PyObject* cap = PyCapsule_New(&ctx->tensor, "dltensor", [](PyObject* c) {
    if (PyCapsule_IsValid(c, "dltensor")) {
      auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
      m->deleter(m);
    }
  });
  if (cap == nullptr) {
    delete ctx;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(cap);
}

// A PieceBatch array's data; `keep` holds the array (a view of the batch) for the call.
template <class T>
const T* data_of(const py::object& batch, const char* name, size_t* count, std::vector<py::object>& keep) {
  auto a = py::array_t<T, py::array::c_style>::ensure(batch.attr(name));
  if (!a) throw py::type_error(std::string("PieceBatch.") + name + " is not a contiguous array");
  *count = static_cast<size_t>(a.size());
  const T* data = a.data();
  keep.push_back(std::move(a));
  return data;
}

struct PyDeviceEngine {
  std::unique_ptr<DeviceEngine> engine;
  std::mutex busy;
};

}  // namespace

PYBIND11_MODULE(_crayon_cuda, m) {
  m.doc() = "The CUDA batch engine of crayon-hf (see crayon_hf.cuda).";

  m.def("device_count", [] {
    std::string why;
    const int n = crayon::cuda::device_count(&why);
    return py::make_tuple(n, why);
  }, "(number of usable CUDA devices, the runtime's reason when it is 0).");

  py::class_<DeviceArray>(m, "DeviceArray", "A 1-D array in GPU memory; torch.from_dlpack and cupy.from_dlpack take it.")
      .def("__dlpack__", [](const DeviceArray& a, const py::args&, const py::kwargs&) { return to_dlpack(a); },
           "The array as a DLPack capsule. The data is ready on every stream when this returns.")
      .def("__dlpack_device__", [](const DeviceArray& a) { return py::make_tuple(kDLCUDA, a.buffer->device()); })
      .def("__len__", [](const DeviceArray& a) { return a.length; })
      .def_property_readonly("shape", [](const DeviceArray& a) { return py::make_tuple(a.length); })
      .def_property_readonly("dtype", [](const DeviceArray& a) {
        return py::dtype(std::string(a.code == 1 ? "uint" : "int") + std::to_string(a.bits));
      })
      .def_property_readonly("device", [](const DeviceArray& a) { return "cuda:" + std::to_string(a.buffer->device()); })
      .def("numpy", [](const DeviceArray& a) {
        py::array out(py::dtype(std::string(a.code == 1 ? "uint" : "int") + std::to_string(a.bits)),
                      std::vector<py::ssize_t>{static_cast<py::ssize_t>(a.length)});
        {
          py::gil_scoped_release release;
          a.buffer->to_host(out.mutable_data(), static_cast<size_t>(a.length) * a.bits / 8);
        }
        return out;
      }, "A host copy as a numpy array.");

  py::class_<PyDeviceEngine>(m, "DeviceEngine", "A vocabulary's per-piece encoder tables on one GPU.")
      .def(py::init([](const py::dict& tables, int device) {
        crayon::piece::PieceTables t;
        std::vector<py::array> keep;  // the arrays stay alive while the constructor copies them
        auto arr = [&](const char* name) -> const void* {  // null when the table is absent
          if (!tables.contains(name)) return nullptr;
          py::array a = py::array::ensure(tables[name], py::array::c_style);
          if (!a) throw py::type_error(std::string("table ") + name + " is not an array");
          keep.push_back(a);
          return a.data();
        };
        auto size = [&](const char* name) { return static_cast<uint64_t>(py::array(tables[name]).size()); };
        t.n_ids = tables["n_ids"].cast<uint32_t>();
        t.trie_units = static_cast<const int32_t*>(arr("trie_units"));
        t.trie_values = static_cast<const int32_t*>(arr("trie_values"));
        t.token_offsets = static_cast<const uint32_t*>(arr("token_offsets"));
        const void* byte_rank = arr("byte_rank");
        if (!t.trie_units || !t.trie_values || !t.token_offsets || !byte_rank) throw py::value_error("incomplete piece tables");
        if (size("byte_rank") != 256 || size("trie_units") != 2 * size("trie_values") ||
            size("token_offsets") != uint64_t{t.n_ids} + 1) {
          throw py::value_error("piece tables of inconsistent sizes");
        }
        t.trie_size = static_cast<uint32_t>(size("trie_values"));
        std::memcpy(t.byte_rank, byte_rank, sizeof t.byte_rank);
        crayon::cuda::TableSizes sizes;
        t.split_left = static_cast<const uint32_t*>(arr("split_left"));
        t.split_right = static_cast<const uint32_t*>(arr("split_right"));
        t.pairs = static_cast<const crayon::PairEntry*>(arr("pairs"));
        if (t.split_left && t.split_right && t.pairs) {
          if (size("split_left") != t.n_ids || size("split_right") != t.n_ids) throw py::value_error("split tables of the wrong size");
          t.pair_capacity = static_cast<uint32_t>(size("pairs") / 3);
          t.slow = static_cast<const uint8_t*>(arr("slow"));
          if (t.slow && size("slow") != t.n_ids) throw py::value_error("slow table of the wrong size");
          t.bloom = static_cast<const uint64_t*>(arr("bloom"));
          if (t.bloom) {
            sizes.bloom_words = size("bloom");
            t.bloom_mask = sizes.bloom_words * 64 - 1;
          }
        } else {
          t.split_left = t.split_right = nullptr;
          t.pairs = nullptr;
        }
        auto e = std::make_unique<PyDeviceEngine>();
        {
          py::gil_scoped_release release;
          e->engine = std::make_unique<DeviceEngine>(t, sizes, device);
        }
        return e;
      }), py::arg("tables"), py::arg("device"))
      .def_property_readonly("device", [](const PyDeviceEngine& e) { return e.engine->device(); })
      .def("encode", [](PyDeviceEngine& e, const py::object& batch, bool to_host) -> py::tuple {
        size_t text_bytes, n_piece_words, n_doc_pieces, n_long;
        crayon::cuda::BatchInput in{};
        std::vector<py::object> keep;
        in.text = data_of<uint8_t>(batch, "text", &text_bytes, keep);
        in.text_bytes = text_bytes;
        in.pieces = reinterpret_cast<const BatchPiece*>(data_of<uint32_t>(batch, "pieces", &n_piece_words, keep));
        in.n_pieces = n_piece_words / 2;
        in.doc_pieces = data_of<uint64_t>(batch, "doc_pieces", &n_doc_pieces, keep);
        in.n_docs = n_doc_pieces - 1;
        in.long_pieces = data_of<uint32_t>(batch, "long_pieces", &n_long, keep);
        in.n_long = n_long;
        const py::object encode_reference = batch.attr("encode_reference");

        crayon::cuda::ReferenceFn reference = [&](const uint32_t* idx, size_t n, std::vector<int32_t>& counts,
                                                  std::vector<uint32_t>& ids) {
          py::gil_scoped_acquire gil;
          py::array_t<uint32_t> which(static_cast<py::ssize_t>(n));
          std::memcpy(which.mutable_data(), idx, n * sizeof(uint32_t));
          const py::tuple r = encode_reference(which, 0);
          auto c = r[0].cast<py::array_t<int32_t>>();
          auto v = r[1].cast<py::array_t<uint32_t>>();
          counts.assign(c.data(), c.data() + c.size());
          ids.assign(v.data(), v.data() + v.size());
        };
        py::array_t<int64_t> offsets(static_cast<py::ssize_t>(in.n_docs + 1));
        py::object ids_out;
        crayon::cuda::HostSink sink;
        sink.offsets = offsets.mutable_data();
        sink.ids = [&](uint64_t n_tokens) {
          py::gil_scoped_acquire gil;
          py::array_t<uint32_t> a(static_cast<py::ssize_t>(n_tokens));
          uint32_t* p = a.mutable_data();
          ids_out = std::move(a);
          return p;
        };
        crayon::cuda::BatchOutput out;
        {
          py::gil_scoped_release release;
          std::lock_guard<std::mutex> lock(e.busy);
          out = e.engine->encode(in, reference, to_host ? &sink : nullptr);
        }
        py::dict stats;
        stats["n_left"] = out.n_left;
        stats["n_long"] = in.n_long;
        stats["kernel_ms"] = out.kernel_ms;
        if (to_host) return py::make_tuple(ids_out, offsets, stats);
        return py::make_tuple(py::cast(DeviceArray{out.ids, 1, 32, static_cast<int64_t>(out.n_tokens)}),
                              py::cast(DeviceArray{out.offsets, 0, 64, static_cast<int64_t>(in.n_docs + 1)}), stats);
      }, py::arg("batch"), py::arg("to_host"),
      "Encodes a PieceBatch: (ids, offsets, stats), numpy arrays when to_host, else DeviceArrays.");
}
