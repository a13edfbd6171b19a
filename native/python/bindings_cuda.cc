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
using crayon::SpecialAt;
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
      .def("staging", [](py::object self, uint64_t n_bytes) {
        // Writable views of the engine's pinned upload buffer, for mark_batch to fill. They are
        // valid until the next staging() or encode() call: the caller drops them before encode.
        PyDeviceEngine& e = self.cast<PyDeviceEngine&>();
        {
          py::gil_scoped_release release;
          e.engine->reserve_staging(n_bytes);
        }
        const auto n = static_cast<py::ssize_t>(n_bytes);
        py::array text(py::dtype::of<uint8_t>(), {n}, e.engine->staging_text(), self);
        py::array marks(py::dtype::of<uint8_t>(), {n}, e.engine->staging_marks(), self);
        return py::make_tuple(text, marks);
      }, py::arg("n_bytes"), "(text, marks) uint8 views of pinned memory for a batch of n_bytes.")
      .def("encode", [](PyDeviceEngine& e, uint64_t n_bytes, py::array_t<uint64_t, py::array::c_style | py::array::forcecast> doc_bytes, py::array_t<uint32_t, py::array::c_style | py::array::forcecast> specials, const py::object& reference, bool to_host) -> py::tuple {
        if (doc_bytes.size() < 1 || doc_bytes.data()[doc_bytes.size() - 1] != n_bytes) {
          throw py::value_error("doc_bytes must end at the batch's size");
        }
        crayon::cuda::BatchInput in;
        in.text_bytes = n_bytes;
        in.doc_bytes = doc_bytes.data();
        in.n_docs = static_cast<uint64_t>(doc_bytes.size()) - 1;
        in.specials = reinterpret_cast<const SpecialAt*>(specials.data());
        in.n_specials = static_cast<uint64_t>(specials.size()) / 2;
        for (uint64_t i = 0; i < in.n_specials; ++i) {
          if (in.specials[i].pos >= n_bytes) throw py::value_error("special token outside the batch");
        }
        crayon::cuda::ReferenceFn ref = [&](const uint32_t* starts, const uint32_t* lens, size_t n,
                                            std::vector<int32_t>& counts, std::vector<uint32_t>& ids) {
          py::gil_scoped_acquire gil;
          py::array_t<uint32_t> s(static_cast<py::ssize_t>(n)), l(static_cast<py::ssize_t>(n));
          std::memcpy(s.mutable_data(), starts, n * sizeof(uint32_t));
          std::memcpy(l.mutable_data(), lens, n * sizeof(uint32_t));
          const py::tuple r = reference(s, l);
          auto c = r[0].cast<py::array_t<int32_t, py::array::c_style | py::array::forcecast>>();
          auto v = r[1].cast<py::array_t<uint32_t, py::array::c_style | py::array::forcecast>>();
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
          out = e.engine->encode(in, ref, to_host ? &sink : nullptr);
        }
        py::dict stats;
        stats["n_pieces"] = out.n_pieces;
        stats["n_long"] = out.n_long;
        stats["n_left"] = out.n_left;
        stats["kernel_ms"] = out.kernel_ms;
        stats["upload_ms"] = out.upload_ms;
        stats["fix_ms"] = out.fix_ms;
        stats["tail_ms"] = out.tail_ms;
        if (to_host) return py::make_tuple(ids_out, offsets, stats);
        return py::make_tuple(py::cast(DeviceArray{out.ids, 1, 32, static_cast<int64_t>(out.n_tokens)}),
                              py::cast(DeviceArray{out.offsets, 0, 64, static_cast<int64_t>(in.n_docs + 1)}), stats);
      }, py::arg("n_bytes"), py::arg("doc_bytes"), py::arg("specials"), py::arg("reference"), py::arg("to_host"),
      "Encodes the batch staged by staging() and TiktokenEngine.mark_batch: (ids, offsets, stats), "
      "numpy arrays when to_host, else DeviceArrays. reference(starts, lens) -> (counts, ids) is "
      "the CPU engine for the pieces handed back.");
}
