// Python bindings for the engine: thin by design. Policy (argument checking, error messages,
// tiktoken's defaults) lives in Python; these functions convert, release the GIL, and call in.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/cartridge.h"
#include "engines/hf_components.h"
#include "engines/hf_batch.h"
#include "engines/hf_engine.h"
#include "core/huge_pages.h"
#include "core/parallel.h"
#include "core/thread_scratch.h"
#include "text/normalize.h"
#include "text/precompiled.h"
#include "text/piece_blocks.h"
#include "text/pretokenize.h"
#include "engines/piece_batch.h"
#include "engines/tiktoken_engine.h"
#include "core/xxhash64.h"

namespace py = pybind11;
using namespace crayon;

namespace {

// A str's UTF-8 view without copying (CPython caches it on the object). Raises
// UnicodeEncodeError for lone surrogates, exactly like tiktoken's binding.
std::string_view utf8_view(const py::handle& s) {
  Py_ssize_t n = 0;
  const char* p = PyUnicode_AsUTF8AndSize(s.ptr(), &n);
  if (p == nullptr) throw py::error_already_set();
  return std::string_view(p, static_cast<size_t>(n));
}

std::string_view bytes_view(const py::handle& b) {
  char* p = nullptr;
  Py_ssize_t n = 0;
  if (PyBytes_AsStringAndSize(b.ptr(), &p, &n) != 0) throw py::error_already_set();
  return std::string_view(p, static_cast<size_t>(n));
}

// Ctrl-C during a long batch. Python's signal handler only sets a flag that the interpreter looks
// at between bytecodes, so a native call holding no GIL would finish the whole batch first (13 s
// on a large one). Batch loops ask `stop()` before each document: the thread that made the call
// (the main thread, the only one Python runs signal handlers on) takes the GIL at most every
// 10 ms to run PyErr_CheckSignals; once that raises, every thread skips its remaining documents
// and the caller re-raises the exception (KeyboardInterrupt) when the batch returns. A single
// document is not cut short: the delay is bounded by the longest document one thread is on.
class Interrupts {
 public:
  Interrupts() : caller_(std::this_thread::get_id()), last_(std::chrono::steady_clock::now()) {}
  Interrupts(const Interrupts&) = delete;
  Interrupts& operator=(const Interrupts&) = delete;

  // Called without the GIL, from any thread of the batch.
  bool stop() {
    if (stopped_.load(std::memory_order_relaxed)) return true;
    if (std::this_thread::get_id() != caller_) return false;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(10)) return false;
    last_ = now;
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() == 0) return false;
    error_ = std::make_unique<py::error_already_set>();  // fetches (and clears) the exception
    stopped_.store(true, std::memory_order_relaxed);
    return true;
  }

  // With the GIL, after the batch: raises what a signal handler raised during it.
  void raise_if_stopped() {
    if (error_) {
      std::unique_ptr<py::error_already_set> e = std::move(error_);
      e->restore();
      throw py::error_already_set();
    }
  }

 private:
  const std::thread::id caller_;
  std::chrono::steady_clock::time_point last_;  // touched by the caller thread only
  std::atomic<bool> stopped_{false};
  std::unique_ptr<py::error_already_set> error_;
};

// The ids of one call that are read before it returns (made a list, or counted): the thread's
// vector, whose capacity stays for the next call (a fresh vector grew by doubling: 11-13
// reallocations and copies of a 16 KiB document's ids), given up past kKeptIds so that one huge
// text does not keep its memory. A call made while the thread's vector is in use (a finalizer
// that encodes, run by the garbage collector while a list is built) gets a vector of its own.
class CallIds {
 public:
  CallIds() : scratch_(thread_scratch<Scratch>()) {
    if (scratch_.busy) return;
    scratch_.busy = true;
    ids_ = &scratch_.ids;
    ids_->clear();
  }
  ~CallIds() {
    if (ids_ != &scratch_.ids) return;
    if (scratch_.ids.capacity() > kKeptIds) std::vector<uint32_t>().swap(scratch_.ids);
    scratch_.busy = false;
  }
  CallIds(const CallIds&) = delete;
  CallIds& operator=(const CallIds&) = delete;

  std::vector<uint32_t>& operator*() { return *ids_; }

 private:
  static constexpr size_t kKeptIds = size_t{1} << 20;  // 4 MiB per thread at most
  struct Scratch {
    std::vector<uint32_t> ids;
    bool busy = false;
  };
  Scratch& scratch_;
  std::vector<uint32_t> own_;
  std::vector<uint32_t>* ids_ = &own_;
};

// The GIL, released for one text's native work unless the text is short. Releasing it and taking
// it back costs ~100 ns when no other thread wants it, and when one does, a wait for that thread's
// turn; a text under kKeptBelow bytes is a few microseconds of work, which holding the GIL costs
// other threads less (numpy keeps it for small arrays the same way). Measured: encode("hi") on the
// tokenizers face spent a sixth of its native time releasing and taking back the GIL. Batches
// always release it.
class ReleaseGilUnlessShort {
 public:
  explicit ReleaseGilUnlessShort(size_t text_bytes) {
    if (text_bytes >= kKeptBelow) release_.emplace();
  }

 private:
  static constexpr size_t kKeptBelow = 1024;
  std::optional<py::gil_scoped_release> release_;
};

// Token counts without ids kept: each call encodes into the thread's CallIds.
template <class EncodeInto>
size_t count_with(EncodeInto&& encode_into) {
  CallIds ids;
  encode_into(*ids);
  return (*ids).size();
}

py::array_t<uint32_t> to_numpy(std::vector<uint32_t>&& ids) {
  auto* owned = new std::vector<uint32_t>(std::move(ids));
  py::capsule free_when_done(owned, [](void* p) { delete static_cast<std::vector<uint32_t>*>(p); });
  return py::array_t<uint32_t>({owned->size()}, {sizeof(uint32_t)}, owned->data(), free_when_done);
}

// One token id: any int-like object (numpy integers included) in [0, 2**32), else OverflowError,
// matching tiktoken's u32 conversion.
uint32_t id_from(const py::handle& h) {
  PyObject* o = h.ptr();
  py::object owned;
  if (!PyLong_Check(o)) {
    owned = py::reinterpret_steal<py::object>(PyNumber_Index(o));
    if (!owned) throw py::error_already_set();
    o = owned.ptr();
  }
  const unsigned long long v = PyLong_AsUnsignedLongLong(o);
  if ((v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) || v > 0xFFFFFFFFULL) {
    PyErr_Clear();
    PyErr_SetString(PyExc_OverflowError, "out of range integral type conversion attempted");
    throw py::error_already_set();
  }
  return static_cast<uint32_t>(v);
}

// Token ids from any Python sequence of ints, as u32 (OverflowError outside [0, 2**32), like
// tiktoken's Vec<u32> conversion).
std::vector<uint32_t> ids_from(const py::handle& seq) {
  PyObject* o = seq.ptr();
  std::vector<uint32_t> out;
  if (PyList_Check(o) || PyTuple_Check(o)) {
    // The common case, read straight from the item array (no iterator, no temporary handles).
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    PyObject** items = PySequence_Fast_ITEMS(o);
    out.resize(static_cast<size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* item = items[i];
      if (PyLong_CheckExact(item)) {
        const unsigned long v = PyLong_AsUnsignedLong(item);
        if (!(v == static_cast<unsigned long>(-1) && PyErr_Occurred()) && v <= 0xFFFFFFFFUL) {
          out[static_cast<size_t>(i)] = static_cast<uint32_t>(v);
          continue;
        }
        PyErr_Clear();
      }
      out[static_cast<size_t>(i)] = id_from(item);
    }
    return out;
  }
  if (PyObject_CheckBuffer(o) && py::isinstance<py::array>(seq)) {
    auto a = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(seq);
    if (!a) throw py::type_error("token ids must be integers");
    out.resize(static_cast<size_t>(a.size()));
    const int64_t* d = a.data();
    for (size_t i = 0; i < out.size(); ++i) {
      if (d[i] < 0 || d[i] > 0xFFFFFFFFLL) {
        PyErr_SetString(PyExc_OverflowError, "out of range integral type conversion attempted");
        throw py::error_already_set();
      }
      out[i] = static_cast<uint32_t>(d[i]);
    }
    return out;
  }
  py::sequence s = py::reinterpret_borrow<py::sequence>(seq);
  out.reserve(static_cast<size_t>(py::len(s)));
  for (py::handle h : s) out.push_back(id_from(h));
  return out;
}

std::vector<uint8_t> mask_from(const py::bytes& b) {
  std::string_view v = bytes_view(b);
  return std::vector<uint8_t>(v.begin(), v.end());
}

SplitPattern pattern_from_name(const std::string& name) {
  if (name == "none") return SplitPattern::kNone;
  if (name == "r50k") return SplitPattern::kR50k;
  if (name == "cl100k") return SplitPattern::kCl100k;
  if (name == "o200k") return SplitPattern::kO200k;
  if (name == "llama3") return SplitPattern::kLlama3;
  throw py::value_error("unknown native split pattern '" + name + "'");
}

const char* pattern_name(SplitPattern p) {
  switch (p) {
    case SplitPattern::kNone: return "none";
    case SplitPattern::kR50k: return "r50k";
    case SplitPattern::kCl100k: return "cl100k";
    case SplitPattern::kO200k: return "o200k";
    case SplitPattern::kLlama3: return "llama3";
  }
  return "unknown";
}

[[noreturn]] void raise_bad_token(uint32_t id) {
  throw py::key_error("Invalid token for decoding: " + std::to_string(id));
}

[[noreturn]] void raise_missing_byte(const BpeError& e) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", e.byte());
  throw py::value_error(std::string("cannot encode: byte ") + buf +
                        " has no token in this vocabulary (mergeable_ranks must contain every single byte)");
}

// The UTF-8 views of a list of str (valid while the list's strings live).
std::vector<std::string_view> utf8_views(const py::list& texts) {
  std::vector<std::string_view> views;
  views.reserve(texts.size());
  for (py::handle h : texts) views.push_back(utf8_view(h));
  return views;
}

// Runs fn without the GIL. Once it is back: what a signal handler raised meanwhile (when
// `interrupts` watched fn), else a byte without a token (BpeError) as tiktoken's ValueError.
template <class F>
void without_gil(F&& fn, Interrupts* interrupts = nullptr) {
  bool missing = false;
  uint8_t missing_byte = 0;
  {
    py::gil_scoped_release release;
    try {
      fn();
    } catch (const BpeError& err) {
      missing = true;
      missing_byte = err.byte();
    }
  }
  if (interrupts != nullptr) interrupts->raise_if_stopped();
  if (missing) raise_missing_byte(BpeError(missing_byte));
}

using Engine = TiktokenEngine;

// What a ShortTokenIndex holds, for tests and docs: {'tokens', 'left_out', 'unreached', 'bytes', 'complete'},
// or None.
py::object index_stats(const ShortTokenIndex* index) {
  if (index == nullptr) return py::none();
  py::dict d;
  d["tokens"] = index->size();
  d["left_out"] = index->left_out();
  d["unreached"] = index->unreached();
  d["bytes"] = index->bytes();
  d["complete"] = index->complete();
  return d;
}

// The Python-side handle of an engine.
class PyEngine {
 public:
  explicit PyEngine(std::shared_ptr<const Engine> engine) : engine_(std::move(engine)) {}
  PyEngine(const PyEngine&) = delete;
  PyEngine& operator=(const PyEngine&) = delete;

  // Every use goes through these, so the checks deferred from load (Engine::ready: checksum,
  // O(n_ids) table checks) run before the first read of the tables: ValueError at first use.
  const Engine& operator*() const {
    engine_->ready();
    return *engine_;
  }
  const Engine* operator->() const {
    engine_->ready();
    return engine_.get();
  }
  // What the face reads at load, safe before ready(): header fields, META, the special tokens
  // (each read bounds-checked).
  const Engine& unchecked() const { return *engine_; }

  // A list of Python ints. Token ids are interned: one int object per id value, made the first
  // time the process meets that id and kept, so a list costs a reference count per token instead
  // of an allocation and a free (tokenizers' callers keep lists alive, and fastokens does the
  // same). Measured in the peer benchmark (libraries taking turns, new text): Chinese +10-25%,
  // English and code within noise. An earlier per-engine table measured slower; this one is one
  // flat array for every engine, so the ids of a vocabulary's common tokens stay in cache.
  // Memory: 8 MiB of address space, of which the pages of ids in use are touched, plus 32 bytes
  // per distinct id met (at most 6.4 MB for o200k). Ints are immutable, so sharing one object is
  // invisible to callers. Call with the GIL held.
  static constexpr uint32_t kInterned = 1u << 20;  // every shared vocabulary's ids are below this
  static PyObject** interned_table() {
    // (Made on first use; if calloc fails that call raises MemoryError and the next one retries.)
    static PyObject** const table = [] {
      auto* t = static_cast<PyObject**>(std::calloc(kInterned, sizeof(PyObject*)));
      if (t == nullptr) throw std::bad_alloc();
      return t;
    }();
    return table;
  }
  // `table` is interned_table(), read once by a caller's loop (its guard is a load and a branch).
  static PyObject* interned_id(PyObject** table, uint32_t id) {
    if (id >= kInterned) return PyLong_FromUnsignedLong(id);
    PyObject* o = table[id];
    if (o == nullptr) {
      o = PyLong_FromUnsignedLong(id);
      if (o == nullptr) return nullptr;
      table[id] = o;  // the table's reference, never released
    }
    Py_INCREF(o);
    return o;
  }

  py::list to_list(const std::vector<uint32_t>& ids) const { return id_list(ids.data(), ids.size()); }

  static py::list id_list(const uint32_t* ids, size_t n) { return id_list_around(nullptr, ids, n, nullptr); }

  // before + ids + after as one new list (before and after are lists of ints, shared, not copied).
  static py::list id_list(const py::list& before, const uint32_t* ids, size_t n, const py::list& after) {
    return id_list_around(before.ptr(), ids, n, after.ptr());
  }

 private:
  // id_list's work; a null before or after stands for an empty list.
  static py::list id_list_around(PyObject* before, const uint32_t* ids, size_t n, PyObject* after) {
    const Py_ssize_t nb = before != nullptr ? PyList_GET_SIZE(before) : 0;
    const Py_ssize_t na = after != nullptr ? PyList_GET_SIZE(after) : 0;
    PyObject** const table = interned_table();
    PyObject* list = PyList_New(nb + static_cast<Py_ssize_t>(n) + na);
    if (list == nullptr) throw py::error_already_set();
    for (Py_ssize_t i = 0; i < nb; ++i) {
      PyObject* v = PyList_GET_ITEM(before, i);
      Py_INCREF(v);
      PyList_SET_ITEM(list, i, v);
    }
    // The loop a list of ids spends its time in: an id met before is a table read and a
    // reference; the list's item array is read once (PyList_SET_ITEM reloads it after every
    // reference count, which the compiler cannot prove does not change it).
    PyObject** const items = reinterpret_cast<PyListObject*>(list)->ob_item + nb;
    for (size_t i = 0; i < n; ++i) {
      const uint32_t id = ids[i];
      PyObject* v = id < kInterned ? table[id] : nullptr;
      if (v != nullptr) {
        Py_INCREF(v);
      } else if ((v = interned_id(table, id)) == nullptr) {
        Py_DECREF(list);
        throw py::error_already_set();
      }
      items[i] = v;
    }
    for (Py_ssize_t i = 0; i < na; ++i) {
      PyObject* v = PyList_GET_ITEM(after, i);
      Py_INCREF(v);
      PyList_SET_ITEM(list, nb + static_cast<Py_ssize_t>(n) + i, v);
    }
    return py::reinterpret_steal<py::list>(list);
  }

  std::shared_ptr<const Engine> engine_;
};

// The bytes of a sequence of ids (KeyError on an id that is not a token), decoded without the GIL.
std::string decode_ids(const TiktokenEngine& e, const py::handle& ids) {
  const std::vector<uint32_t> v = ids_from(ids);
  std::string out;
  uint32_t bad = 0;
  bool ok;
  {
    py::gil_scoped_release release;
    ok = e.decode(v.data(), v.size(), out, &bad);
  }
  if (!ok) raise_bad_token(bad);
  return out;
}

// A tiktoken batch encoded without the GIL: one id vector per text, or the first text holding a
// special token flagged in `disallowed` (checked before that text is encoded, as tiktoken does).
struct TiktokenBatch {
  std::vector<std::vector<uint32_t>> ids;
  int64_t denied_text = -1;
  int32_t denied_special = -1;
};

// `finished(batch, i)` runs on the thread that encoded text i, right after it, without the GIL.
// `views`: the texts' UTF-8 (utf8_views), alive for the call.
template <class Finished>
TiktokenBatch encode_tiktoken_batch(const TiktokenEngine& e, const std::vector<std::string_view>& views,
                                    const py::bytes& allowed, const py::bytes& disallowed, size_t num_threads,
                                    bool ordinary, Finished&& finished) {
  const std::vector<uint8_t> allow = mask_from(allowed);
  const std::vector<uint8_t> deny = mask_from(disallowed);
  const bool check = std::find(deny.begin(), deny.end(), 1) != deny.end();
  TiktokenBatch b;
  b.ids.resize(views.size());
  std::vector<int32_t> found(views.size(), -1);
  Interrupts interrupts;
  without_gil([&] {
    parallel_for(views.size(), num_threads, [&](size_t i) {
      if (interrupts.stop()) return;
      if (check) {
        const SpecialMatch m = e.find_special(views[i], deny);
        if (m.index >= 0) found[i] = m.index;
      }
      if (found[i] < 0) {
        if (ordinary) e.encode_ordinary(views[i], b.ids[i]);
        else e.encode(views[i], allow, b.ids[i]);
      }
      finished(b, i);
    });
  }, &interrupts);
  for (size_t i = 0; i < found.size(); ++i) {
    if (found[i] >= 0) {
      b.denied_text = static_cast<int64_t>(i);
      b.denied_special = found[i];
      break;
    }
  }
  return b;
}

// A batch's documents finish out of order on the pool's threads; the calling thread turns them
// into results in order, between documents of its own, so that building results (lists, arrays)
// is not a serial pass after the last document. Any thread marks document i finished; only the
// calling thread takes, so what take's fn touches needs no lock.
class InOrder {
 public:
  explicit InOrder(size_t n) : n_(n), ready_(new std::atomic<bool>[n]) {
    for (size_t i = 0; i < n; ++i) ready_[i].store(false, std::memory_order_relaxed);
  }

  void mark(size_t i) { ready_[i].store(true, std::memory_order_release); }
  bool on_caller() const { return std::this_thread::get_id() == caller_; }
  // Whether the documents up to `ahead` past those taken are all finished (and some are left).
  bool run_ready(size_t ahead) const { return taken_ < n_ && ready(std::min(taken_ + ahead, n_) - 1); }
  bool ready(size_t i) const { return ready_[i].load(std::memory_order_acquire); }
  size_t taken() const { return taken_; }

  // fn(i) for every finished document past those taken, in order (the calling thread only).
  template <class F>
  void take(F&& fn) {
    for (; taken_ < n_ && ready(taken_); ++taken_) fn(taken_);
  }

 private:
  size_t n_;
  std::unique_ptr<std::atomic<bool>[]> ready_;
  size_t taken_ = 0;
  std::thread::id caller_ = std::this_thread::get_id();
};

// The cyclic GC held off while the calling thread builds a run of a batch's results under the GIL.
// On CPython 3.10 and 3.11 a collection starts inside the allocation that crosses the threshold:
// a batch of 10,000 lists of 150 ints set off ~40 young collections and ~4 older ones, each
// traversing every young list's items (a load of each int), which was ~17% of a one-thread
// `encode_batch` on short documents and all of it serial on the calling thread. Paused, the
// objects are counted as usual and one collection takes them all at the first allocation after
// the pause; from 3.12 on CPython itself defers a collection to the next bytecode boundary, which
// this matches. The pause never outlives the GIL held around it, and nothing inside it runs
// Python code (no collection, hence no finalizer), so no other thread can see or change the
// GC's state meanwhile: a gc.disable() made elsewhere is never undone.
class GcPause {
 public:
  GcPause() : was_enabled_(PyGC_Disable() != 0) {}
  ~GcPause() {
    if (was_enabled_) PyGC_Enable();
  }
  GcPause(const GcPause&) = delete;
  GcPause& operator=(const GcPause&) = delete;

 private:
  bool was_enabled_;
};

// encode_batch's lists, built while the batch is encoded. Python objects need the GIL, so
// building them after the encoding would leave every other core idle for that time. Instead the
// calling thread, between documents of its own, takes the GIL and turns each run of finished
// documents (in order, 32 at a time) into lists, freeing their ids; the pool's threads keep
// encoding meanwhile. A text holding a disallowed special token makes the result
// (text index, special index) instead, as encode_tiktoken_batch does.
py::object encode_tiktoken_batch_lists(const PyEngine& pe, const py::list& texts, const py::bytes& allowed,
                                       const py::bytes& disallowed, size_t num_threads, bool ordinary) {
  const size_t n = texts.size();
  constexpr size_t kRun = 32;
  py::list result(n);
  InOrder order(n);
  auto build_ready = [&](TiktokenBatch& batch) {  // needs the GIL; finished texts' ids are ours
    const GcPause pause;
    order.take([&](size_t i) {
      PyList_SET_ITEM(result.ptr(), static_cast<Py_ssize_t>(i), pe.to_list(batch.ids[i]).release().ptr());
      std::vector<uint32_t>().swap(batch.ids[i]);
    });
  };
  TiktokenBatch b = encode_tiktoken_batch(*pe, utf8_views(texts), allowed, disallowed, num_threads, ordinary,
                                          [&](TiktokenBatch& batch, size_t i) {
    order.mark(i);
    if (!order.on_caller() || !order.run_ready(kRun)) return;
    py::gil_scoped_acquire gil;
    build_ready(batch);
  });
  if (b.denied_text >= 0) return py::make_tuple(b.denied_text, b.denied_special);
  build_ready(b);
  return std::move(result);
}

py::dict cartridge_info(const Cartridge& c) {
  py::dict d;
  d["label"] = c.label();
  d["format_version"] = py::make_tuple(c.header().major, c.header().minor);
  const uint32_t u = c.header().unicode_version;
  d["unicode_version"] = std::to_string(u >> 16) + "." + std::to_string((u >> 8) & 0xFF) + "." + std::to_string(u & 0xFF);
  d["file_size"] = c.header().file_size;
  d["checksum"] = c.header().checksum;
  d["checksum_ok"] = c.checksum_ok();
  d["hot_bytes"] = c.hot_bytes();          // sections its engines read per piece (core/huge_pages.h)
  d["huge_page_bytes"] = c.huge_bytes();   // of the file, moved onto huge pages so far
  py::list sections;
  for (const SectionInfo& s : c.sections()) {
    py::dict e;
    e["id"] = fourcc_name(s.id);
    e["flags"] = s.flags;
    e["offset"] = s.offset;
    e["size"] = s.size;
    sections.append(e);
  }
  d["sections"] = sections;
  return d;
}


// ---- tokenizer.json engine ----------------------------------------------------------------------

// What Encoding._lazy(ids, build, text) does (src/crayon_hf/_hf/encoding.py), done here: for one
// text (HfEngine.encode_lazy: a Python classmethod call was a sixth of a short text's encode) and
// for every text of a batch instead of a Python loop after it (encode_batch_id_lists: on several
// threads the calling thread makes them while the others encode, where a loop after the batch was
// a serial tail of ~1 us per text). The slots and the cache's key are Encoding's own: `_cache` =
// {"fresh": ids}, `_build` = build, `_text` = text. A new reference; takes the id list over. Call
// with the GIL held.
PyObject* make_lazy_encoding(const py::handle& cls, const py::handle& build, py::list ids, const py::handle& text) {
  if (!PyType_Check(cls.ptr())) throw py::type_error("lazy must be (Encoding class, build function)");
  // Interned once, with the GIL held, and kept for the process.
  static PyObject* const fresh = PyUnicode_InternFromString("fresh");
  static PyObject* const cache_name = PyUnicode_InternFromString("_cache");
  static PyObject* const build_name = PyUnicode_InternFromString("_build");
  static PyObject* const text_name = PyUnicode_InternFromString("_text");
  static PyObject* const no_args = PyTuple_New(0);
  if (fresh == nullptr || cache_name == nullptr || build_name == nullptr || text_name == nullptr ||
      no_args == nullptr)
    throw py::error_already_set();
  py::dict cache;
  if (PyDict_SetItem(cache.ptr(), fresh, ids.ptr()) != 0) throw py::error_already_set();
  py::object enc = py::reinterpret_steal<py::object>(
      PyBaseObject_Type.tp_new(reinterpret_cast<PyTypeObject*>(cls.ptr()), no_args, nullptr));
  if (!enc) throw py::error_already_set();
  if (PyObject_SetAttr(enc.ptr(), cache_name, cache.ptr()) != 0 ||
      PyObject_SetAttr(enc.ptr(), build_name, build.ptr()) != 0 ||
      PyObject_SetAttr(enc.ptr(), text_name, text.ptr()) != 0)
    throw py::error_already_set();
  return enc.release().ptr();
}

// encode_batch_id_lists' `lazy` argument: (Encoding class, build function).
class LazyEncodings {
 public:
  explicit LazyEncodings(const py::object& spec) {
    const py::tuple t = spec.cast<py::tuple>();
    if (t.size() != 2 || !PyType_Check(t[0].ptr()))
      throw py::type_error("lazy must be (Encoding class, build function)");
    cls_ = t[0];
    build_ = t[1];
  }

  // A new reference: make_lazy_encoding's encoding of `text`.
  PyObject* make(py::list ids, PyObject* text) const {
    return make_lazy_encoding(cls_, build_, std::move(ids), py::handle(text));
  }

 private:
  py::object cls_, build_;
};

// One sequence's ids up to the model (HfEngine::encode without offsets) as a new list between the
// ints of `before` and `after`; limit >= 0 as RawEncoding::limit. The ids go through the thread's
// CallIds vector, so a call allocates nothing but the list.
py::list hf_id_list(const HfEngine& engine, const py::str& text, bool encode_special_tokens, const py::list& before,
                    const py::list& after, int64_t limit) {
  const std::string_view t = utf8_view(text);
  CallIds call_ids;
  RawEncoding r;
  r.with_offsets = false;  // ids only: the engine skips offsets and words
  if (limit >= 0) r.limit = static_cast<size_t>(limit);  // at least the first `limit` ids (RawEncoding::limit)
  r.ids.swap(*call_ids);
  {
    ReleaseGilUnlessShort gil(t.size());
    engine.encode(t, encode_special_tokens, r);
  }
  r.ids.swap(*call_ids);
  return PyEngine::id_list(before, (*call_ids).data(), (*call_ids).size(), after);
}

ComponentDesc component_from(const py::dict& d) {
  ComponentDesc c;
  auto get_str = [&](const char* k) { return d.contains(k) ? py::cast<std::string>(d[k]) : std::string(); };
  auto get_bool = [&](const char* k, bool dflt) { return d.contains(k) ? py::cast<bool>(d[k]) : dflt; };
  c.type = get_str("type");
  c.pattern = get_str("pattern");
  c.pattern_is_regex = get_bool("regex", false);
  c.content = get_str("content");
  c.behavior = get_str("behavior");
  c.invert = get_bool("invert", false);
  c.add_prefix_space = get_bool("add_prefix_space", false);
  c.use_regex = get_bool("use_regex", true);
  c.individual_digits = get_bool("individual_digits", false);
  c.left = get_bool("left", false);
  c.right = get_bool("right", false);
  c.replacement = get_str("replacement");
  c.prepend_scheme = d.contains("prepend_scheme") ? get_str("prepend_scheme") : std::string("always");
  c.split = get_bool("split", true);
  c.clean_text = get_bool("clean_text", true);
  c.handle_chinese_chars = get_bool("handle_chinese_chars", true);
  c.strip_accents = get_bool("strip_accents", false);
  c.lowercase = get_bool("lowercase", true);
  if (d.contains("charsmap")) c.blob = std::string(bytes_view(d["charsmap"]));
  return c;
}

std::vector<AddedToken> added_from(const py::list& items) {
  std::vector<AddedToken> out;
  for (py::handle h : items) {
    py::tuple t = py::reinterpret_borrow<py::tuple>(h);
    AddedToken a;
    a.id = py::cast<uint32_t>(t[0]);
    a.content = py::cast<std::string>(t[1]);
    a.special = py::cast<bool>(t[2]);
    a.lstrip = py::cast<bool>(t[3]);
    a.rstrip = py::cast<bool>(t[4]);
    a.single_word = py::cast<bool>(t[5]);
    if (t.size() > 6) a.show_text = py::cast<bool>(t[6]);
    out.push_back(std::move(a));
  }
  return out;
}

// An encoding whose offsets are already in characters, as (ids, offsets, words, token texts).
py::tuple raw_tuple(RawEncoding r) {
  const size_t n = r.ids.size();
  py::array_t<int64_t> offsets({n, size_t{2}});
  py::array_t<int64_t> words(n);
  auto o = offsets.mutable_unchecked<2>();
  auto w = words.mutable_unchecked<1>();
  for (size_t i = 0; i < n; ++i) {
    o(i, 0) = r.starts[i];
    o(i, 1) = r.ends[i];
    w(i) = r.words[i];
  }
  py::list texts;
  for (auto& [i, s] : r.token_text) texts.append(py::make_tuple(i, py::str(s.data(), s.size())));
  return py::make_tuple(to_numpy(std::move(r.ids)), offsets, words, texts);
}

py::tuple raw_to_python(std::string_view text, RawEncoding& r) {
  to_char_offsets(text, r.starts, r.ends);
  return raw_tuple(std::move(r));
}

// The raw encodings of a batch, kept natively until the caller says how to assemble them.
struct HfBatch {
  std::vector<RawEncoding> docs;
  bool complete = true;  // every document whole and with offsets (doc() is the full encoding)
};

SpecialBlock block_from(const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& a) {
  if (a.ndim() != 2 || a.shape(0) != static_cast<py::ssize_t>(kEncodingRows))
    throw py::value_error("a special-token block must be a (7, n) int64 array");
  return SpecialBlock{a.data(), static_cast<size_t>(a.shape(1))};
}

using Int64Array = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

// A layout's blocks and trim tables, checked, without the documents' `keep`
// (encode_batch_flat_ids fills it as documents finish). The trim tables stay in `lead` and `trail`.
BatchLayout layout_shell(bool keep_tail, const Int64Array& prefix, const Int64Array& suffix, int64_t sequence_type,
                         const py::object& trim_lead, const py::object& trim_trail, bool add_prefix_space,
                         Int64Array& lead, Int64Array& trail) {
  BatchLayout layout;
  layout.keep_tail = keep_tail;
  layout.prefix = block_from(prefix);
  layout.suffix = block_from(suffix);
  layout.sequence_type = sequence_type;
  if (!trim_lead.is_none()) {
    lead = trim_lead.cast<Int64Array>();
    trail = trim_trail.cast<Int64Array>();
    if (lead.size() != trail.size()) throw py::value_error("trim tables differ in size");
    layout.trim_lead = lead.data();
    layout.trim_trail = trail.data();
    layout.trim_size = static_cast<size_t>(lead.size());
    layout.add_prefix_space = add_prefix_space;
  }
  return layout;
}

// assemble()'s and take_flat()'s parameters, checked. The trim tables stay in `lead` and `trail`.
BatchLayout layout_from(const HfBatch& b, const Int64Array& keep, bool keep_tail, const Int64Array& prefix,
                        const Int64Array& suffix, int64_t sequence_type, const py::object& trim_lead,
                        const py::object& trim_trail, bool add_prefix_space, Int64Array& lead, Int64Array& trail) {
  const size_t nb = b.docs.size();
  if (static_cast<size_t>(keep.size()) != nb) throw py::value_error("keep must have one entry per document");
  BatchLayout layout = layout_shell(keep_tail, prefix, suffix, sequence_type, trim_lead, trim_trail, add_prefix_space,
                                    lead, trail);
  layout.keep.assign(keep.data(), keep.data() + nb);
  for (size_t i = 0; i < nb; ++i)
    if (layout.keep[i] < 0 || static_cast<size_t>(layout.keep[i]) > b.docs[i].ids.size())
      throw py::value_error("keep[i] must be within the document's length");
  return layout;
}

// An array grown in malloc'd memory and handed to numpy as it is (a capsule frees it with the
// array): encode_batch_flat_ids writes its output before the total is known. realloc grows a large
// block by moving pages where it can and shrinks it in place.
template <class T>
class GrownArray {
 public:
  GrownArray() = default;
  GrownArray(const GrownArray&) = delete;
  GrownArray& operator=(const GrownArray&) = delete;
  ~GrownArray() { std::free(data_); }

  size_t size() const { return size_; }
  T* data() { return data_; }

  void reserve(size_t capacity) {
    if (capacity <= capacity_) return;
    T* grown = static_cast<T*>(std::realloc(data_, capacity * sizeof(T)));
    if (grown == nullptr) throw std::bad_alloc();
    data_ = grown;
    capacity_ = capacity;
    advise_huge(data_, capacity_ * sizeof(T));  // as numpy advises its large arrays
  }

  // Room for `more` elements at the end; where they start.
  T* extend(size_t more) {
    if (size_ + more > capacity_) reserve(std::max(size_ + more, capacity_ + capacity_ / 2));
    T* at = data_ + size_;
    size_ += more;
    return at;
  }

  // The elements as a (size / cols, cols) array (one-dimensional when cols is 1), owning them.
  py::array_t<T> release(size_t cols) {
    T* kept = static_cast<T*>(std::realloc(data_, std::max<size_t>(size_, 1) * sizeof(T)));
    if (kept == nullptr) throw std::bad_alloc();
    data_ = nullptr;
    py::capsule owner(kept, [](void* p) { std::free(p); });
    const auto rows = static_cast<py::ssize_t>(size_ / cols);
    capacity_ = size_ = 0;
    if (cols == 1) return py::array_t<T>({rows}, kept, owner);
    return py::array_t<T>({rows, static_cast<py::ssize_t>(cols)}, kept, owner);
  }

 private:
  T* data_ = nullptr;
  size_t size_ = 0, capacity_ = 0;
};

// A batch's ids in one array, documents appended in order as they finish (InOrder), and where
// each starts (bounds, n + 1 of them). The array is sized once, before the first document, at the
// rate (tokens per byte) of the documents finished by then and a fifth more; it grows by half where
// that is not enough.
class FlatIds {
 public:
  FlatIds(size_t n, size_t total_bytes, size_t fixed_per_doc) : n_(n), bytes_(total_bytes), fixed_(fixed_per_doc) {
    *bounds_.extend(n + 1) = 0;
  }

  // Before the first document is appended: bytes_of(i) and tokens_of(i) of the finished ones.
  template <class Bytes, class Tokens>
  void size_at_first(const InOrder& order, Bytes&& bytes_of, Tokens&& tokens_of) {
    if (order.taken() != 0 || n_ == 0 || !order.ready(0)) return;
    size_t sample_bytes = 0, sample_tokens = 0;
    for (size_t i = 0; i < n_ && order.ready(i); ++i) {
      sample_bytes += bytes_of(i);
      sample_tokens += tokens_of(i);
    }
    const double per_byte = sample_bytes > 0 ? static_cast<double>(sample_tokens) / sample_bytes : 0.5;
    ids_.reserve(static_cast<size_t>(1.2 * per_byte * static_cast<double>(bytes_)) + n_ * fixed_ + 64);
  }

  // Room for document i's `count` ids (documents come in order); where they go.
  uint32_t* append(size_t i, size_t count) {
    uint32_t* at = ids_.extend(count);
    bounds_.data()[i + 1] = static_cast<int64_t>(ids_.size());
    return at;
  }

  // (ids uint32, bounds int64), the arrays owning the memory.
  std::pair<py::array_t<uint32_t>, py::array_t<int64_t>> release() { return {ids_.release(1), bounds_.release(1)}; }

 private:
  size_t n_, bytes_, fixed_;
  GrownArray<uint32_t> ids_;
  GrownArray<int64_t> bounds_;
};

size_t total_bytes(const std::vector<std::string_view>& views) {
  size_t bytes = 0;
  for (const std::string_view v : views) bytes += v.size();
  return bytes;
}

class PyHfEngine {
 public:
  PyHfEngine(const py::object& source, const py::list& normalizers, const py::list& pre_tokenizers,
             const py::object& added_raw, const py::object& added_normalized) {
    // `source`: a path, or a Cartridge the face already opened (to read META) -- one open per load.
    std::shared_ptr<const Cartridge> c = py::isinstance<py::str>(source)
                                             ? Cartridge::open(py::cast<std::string>(source))
                                             : py::cast<std::shared_ptr<Cartridge>>(source);
    std::vector<ComponentDesc> norms;
    for (py::handle h : normalizers) {
      const py::dict d = py::reinterpret_borrow<py::dict>(h);
      norms.push_back(component_from(d));
      if (d.contains("charsmap_section")) {
        // A Precompiled normalizer compiled into the cartridge: read in place.
        const std::string id = py::cast<std::string>(d["charsmap_section"]);
        if (id.size() != 4) c->fail("META names a Precompiled section with a bad id");
        char name[5] = {id[0], id[1], id[2], id[3], 0};
        norms.back().section = c->bytes(fourcc(name));
        norms.back().section_owner = c;
      }
    }
    HfPipeline p;
    // Errors name the component as "normalizers[i]" / "pre_tokenizers[i]" (indexes into the flat
    // lists the converter stored), so the Python face can report its JSON path.
    try {
      guard_mapped_reads(c->label(), [&] { p.normalizer = make_normalizer(norms); });
    } catch (const UnsupportedComponent& e) {
      throw UnsupportedComponent(e.index(), "normalizers[" + std::to_string(e.index()) + "]: " + e.what());
    } catch (const CartridgeError& e) {
      c->fail(e.what());
    }
    size_t i = 0;
    for (py::handle h : pre_tokenizers) {
      try {
        p.pre_tokenizers.push_back(make_pre_tokenizer(component_from(py::reinterpret_borrow<py::dict>(h)), i));
      } catch (const UnsupportedComponent& e) {
        throw UnsupportedComponent(i, "pre_tokenizers[" + std::to_string(i) + "]: " + e.what());
      }
      ++i;
    }
    // None, None: the added tokens compiled into the cartridge (HADR / HADN).
    p.added_from_cartridge = added_raw.is_none() && added_normalized.is_none();
    if (!p.added_from_cartridge) {
      p.added_raw = added_from(py::reinterpret_borrow<py::list>(added_raw));
      p.added_normalized = added_from(py::reinterpret_borrow<py::list>(added_normalized));
    }
    guard_mapped_reads(c->label(), [&] { engine_ = std::make_shared<const HfEngine>(c, std::move(p)); });
  }
  // As PyEngine: every use runs the checks deferred from load first (HfEngine::ready).
  const HfEngine& operator*() const {
    engine_->ready();
    return *engine_;
  }
  const HfEngine* operator->() const {
    engine_->ready();
    return engine_.get();
  }
  const HfEngine& unchecked() const { return *engine_; }

 private:
  std::shared_ptr<const HfEngine> engine_;
};

// A new Python int (offsets, lengths: not interned, unlike token ids in PyEngine::id_list, as
// their values are not bounded by a vocabulary).
PyObject* new_int(int64_t v) { return PyLong_FromLongLong(v); }

PyObject* int_list_of(const int64_t* d, Py_ssize_t n) {
  PyObject* list = PyList_New(n);
  if (list == nullptr) return nullptr;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* v = new_int(d[i]);
    if (v == nullptr) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, i, v);
  }
  return list;
}

py::object steal_or_throw(PyObject* o) {
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(o);
}

// A list with one item per segment [bounds[i], bounds[i + 1]) of a row of `size` values, each
// made by make(from, to) (a new reference, or nullptr with a Python error set), the cyclic GC
// held off meanwhile (GcPause).
template <class Make>
py::list segments(py::ssize_t size, const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& bounds,
                  Make&& make) {
  const int64_t* bd = bounds.data();
  const py::ssize_t nb = bounds.size() - 1;
  if (bounds.ndim() != 1 || nb < 0) throw py::value_error("bounds must be a 1-D array of at least one entry");
  for (py::ssize_t i = 0; i < nb; ++i)
    if (bd[i] < 0 || bd[i] > bd[i + 1] || bd[i + 1] > size) throw py::value_error("bounds out of range");
  py::list out(nb);
  const GcPause pause;  // a list (and for offsets a tuple per token) per segment
  for (py::ssize_t i = 0; i < nb; ++i) PyList_SET_ITEM(out.ptr(), i, steal_or_throw(make(bd[i], bd[i + 1])).release().ptr());
  return out;
}

void bind_hf(py::module_& m) {
  m.def("int_list", [](const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& a) {
    if (a.ndim() != 1) throw py::value_error("int_list takes a 1-D array");
    return steal_or_throw(int_list_of(a.data(), static_cast<Py_ssize_t>(a.shape(0))));
  }, py::arg("values"), "array.tolist() for an int64 row.");
  m.def("int_lists", [](const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& a,
                        const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& bounds) {
    const int64_t* d = a.data();
    return segments(a.size(), bounds, [&](int64_t from, int64_t to) { return int_list_of(d + from, to - from); });
  }, py::arg("values"), py::arg("bounds"),
  "[values[bounds[i]:bounds[i + 1]].tolist() for each i].");
  m.def("pair_lists", [](const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& first,
                         const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& second,
                         const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& bounds) {
    if (first.size() != second.size()) throw py::value_error("pair_lists takes two rows of one length");
    const int64_t* a = first.data();
    const int64_t* b = second.data();
    return segments(first.size(), bounds, [&](int64_t from, int64_t to) -> PyObject* {
      PyObject* list = PyList_New(to - from);
      if (list == nullptr) return nullptr;
      for (int64_t k = from; k < to; ++k) {
        PyObject* x = new_int(a[k]);
        PyObject* y = x != nullptr ? new_int(b[k]) : nullptr;
        PyObject* pair = y != nullptr ? PyTuple_Pack(2, x, y) : nullptr;
        Py_XDECREF(x);
        Py_XDECREF(y);
        if (pair == nullptr) {
          Py_DECREF(list);
          return nullptr;
        }
        PyList_SET_ITEM(list, k - from, pair);
      }
      return list;
    });
  }, py::arg("first"), py::arg("second"), py::arg("bounds"),
  "[list(zip(first[s], second[s])) for each segment s = bounds[i]:bounds[i + 1]] (offset mappings).");

  py::register_exception<UnsupportedComponent>(m, "UnsupportedComponent", PyExc_ValueError);

  // Where tokenizers panics (poisoned text, normalize.h), its binding raises pyo3's PanicException,
  // a BaseException: the engine's NormalizerPanic surfaces as crayon_hf's twin of that class, so
  // `except Exception` behaves the same with either library.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const NormalizerPanic& e) {
      py::object cls = py::module_::import("crayon_hf._hf.errors").attr("PanicException");
      PyErr_SetString(cls.ptr(), e.what());
    }
  });

  m.def("build_hf_cartridge", [](const py::dict& model, const std::string& meta_json, const py::bytes& tokenizer_json,
                                 const py::bytes& vocab_strings, const py::object& decode_bytes) {
    static const std::pair<const char*, HfModelKind> kKinds[] = {
        {"bpe_bytes", HfModelKind::kBpeBytes}, {"bpe_chars", HfModelKind::kBpeChars},
        {"wordpiece", HfModelKind::kWordPiece}, {"unigram", HfModelKind::kUnigram},
        {"wordlevel", HfModelKind::kWordLevel}};
    HfSource src;
    const std::string kind = py::cast<std::string>(model["kind"]);
    bool known = false;
    for (const auto& [name, k] : kKinds) {
      if (kind == name) {
        src.kind = k;
        known = true;
      }
    }
    if (!known) throw py::value_error("unknown model kind '" + kind + "'");
    auto get = [&](const char* key) { return model.contains(key) ? py::object(model[key]) : py::object(py::none()); };
    if (!get("byte_tokens").is_none()) {
      for (py::handle h : py::reinterpret_borrow<py::list>(model["byte_tokens"])) {
        py::tuple t = py::reinterpret_borrow<py::tuple>(h);
        src.byte_tokens.emplace_back(std::string(bytes_view(t[0])), py::cast<uint32_t>(t[1]));
      }
    }
    if (!get("merges").is_none()) {
      for (py::handle h : py::reinterpret_borrow<py::list>(model["merges"])) {
        py::tuple t = py::reinterpret_borrow<py::tuple>(h);
        src.merges.push_back(HfMerge{py::cast<uint32_t>(t[0]), py::cast<uint32_t>(t[1]), py::cast<uint32_t>(t[2])});
      }
    }
    if (!get("scores").is_none()) src.scores = py::cast<std::vector<double>>(model["scores"]);
    src.n_ids = py::cast<uint32_t>(model["n_ids"]);
    src.options.unk_id = get("unk_id").is_none() ? -1 : py::cast<int32_t>(model["unk_id"]);
    src.options.fuse_unk = !get("fuse_unk").is_none() && py::cast<bool>(model["fuse_unk"]);
    src.options.ignore_merges = !get("ignore_merges").is_none() && py::cast<bool>(model["ignore_merges"]);
    src.options.byte_fallback = !get("byte_fallback").is_none() && py::cast<bool>(model["byte_fallback"]);
    if (!get("prefix").is_none()) src.options.prefix = std::string(bytes_view(model["prefix"]));
    if (!get("suffix").is_none()) src.options.suffix = std::string(bytes_view(model["suffix"]));
    if (!get("max_input_chars_per_word").is_none()) {
      src.max_input_chars_per_word = py::cast<uint32_t>(model["max_input_chars_per_word"]);
    }
    src.meta_json = meta_json;
    src.tokenizer_json = std::string(bytes_view(tokenizer_json));
    src.vocab_strings = std::string(bytes_view(vocab_strings));
    if (!decode_bytes.is_none()) {
      for (py::handle h : py::reinterpret_borrow<py::list>(decode_bytes)) {
        src.decode_present.push_back(h.is_none() ? 0 : 1);
        src.decode_bytes.emplace_back(h.is_none() ? std::string() : std::string(bytes_view(h)));
      }
    }
    if (!get("added_raw").is_none()) {
      src.compile_added = true;
      src.added_raw = added_from(py::reinterpret_borrow<py::list>(model["added_raw"]));
      src.added_normalized = added_from(py::reinterpret_borrow<py::list>(model["added_normalized"]));
    }
    if (!get("sections").is_none()) {
      for (auto item : py::reinterpret_borrow<py::dict>(model["sections"])) {
        const std::string id = py::cast<std::string>(item.first);
        if (id.size() != 4) throw py::value_error("section ids have four characters, not '" + id + "'");
        char name[5] = {id[0], id[1], id[2], id[3], 0};
        src.extra_sections.emplace_back(fourcc(name), std::string(bytes_view(item.second)));
      }
    }
    std::string image;
    {
      py::gil_scoped_release release;
      try {
        image = build_hf_cartridge(src);
      } catch (const std::exception& e) {
        py::gil_scoped_acquire gil;
        throw py::value_error(std::string("cannot build the cartridge: ") + e.what());
      }
    }
    return py::bytes(image);
  }, py::arg("model"), py::arg("meta_json"), py::arg("tokenizer_json"), py::arg("vocab_strings"),
  py::arg("decode_bytes"),
  "Compiles a tokenizer.json (already planned by conversion/hf_json.py) into a cartridge image. `model`: kind "
  "(bpe_bytes, bpe_chars, wordpiece, unigram, wordlevel), byte_tokens [(bytes, id)], merges [(left, right, "
  "merged)], scores, n_ids, unk_id, fuse_unk, ignore_merges, byte_fallback, prefix, suffix, "
  "max_input_chars_per_word; optionally added_raw / added_normalized (rows as HfEngine takes them: compiled "
  "into HADR / HADN) and sections {id: bytes} written as given.");

  m.def("hf_merge_ids", [](const py::dict& vocab, const py::list& merges, const py::str& prefix) -> py::object {
    // The Python loop in conversion/hf_json.py (_merge_ids) does the same with three dict
    // lookups per merge, each a cache miss in a large dict: 1.5 s of gemma's first load, 0.7 s
    // here. Anything unusual (a key that is not UTF-8, a merge of another shape, a token
    // missing) returns None, and that loop runs instead and names the problem.
    auto utf8_of = [](PyObject* o, std::string_view* out) {
      if (!PyUnicode_CheckExact(o)) return false;
      Py_ssize_t n = 0;
      const char* p = PyUnicode_AsUTF8AndSize(o, &n);  // kept by the str object
      if (p == nullptr) {
        PyErr_Clear();  // lone surrogates
        return false;
      }
      *out = std::string_view(p, static_cast<size_t>(n));
      return true;
    };
    // Open addressing over the keys' UTF-8 (kept by the str objects), load factor at most 1/2.
    struct Slot {
      uint64_t hash;
      const char* data;  // null: empty
      uint32_t size;
      uint32_t id;
    };
    size_t capacity = 16;
    while (capacity < 2 * py::len(vocab)) capacity <<= 1;
    std::vector<Slot> slots(capacity, Slot{0, nullptr, 0, 0});
    const size_t mask = capacity - 1;
    auto slot_of = [&](std::string_view key, uint64_t h) -> Slot& {
      for (size_t i = h & mask;; i = (i + 1) & mask) {
        Slot& s = slots[i];
        if (s.data == nullptr) return s;
        if (s.hash == h && s.size == key.size() && std::memcmp(s.data, key.data(), key.size()) == 0) return s;
      }
    };
    for (auto item : vocab) {
      std::string_view key;
      if (!utf8_of(item.first.ptr(), &key) || key.size() > 0xFFFFFFFFu || !PyLong_CheckExact(item.second.ptr())) {
        return py::none();
      }
      const unsigned long long id = PyLong_AsUnsignedLongLong(item.second.ptr());
      if (PyErr_Occurred() || id > 0xFFFFFFFFull) {
        PyErr_Clear();
        return py::none();
      }
      const uint64_t h = xxhash64(key.data(), key.size(), 0);
      Slot& s = slot_of(key, h);
      s = Slot{h, key.data(), static_cast<uint32_t>(key.size()), static_cast<uint32_t>(id)};  // keys are distinct
    }
    std::string_view pre;
    if (!utf8_of(prefix.ptr(), &pre)) return py::none();
    auto find = [&](std::string_view token, uint32_t* id) {
      const Slot& s = slot_of(token, xxhash64(token.data(), token.size(), 0));
      if (s.data == nullptr) return false;
      *id = s.id;
      return true;
    };
    py::list out(merges.size());
    std::string merged;
    for (size_t i = 0; i < merges.size(); ++i) {
      PyObject* m = PyList_GET_ITEM(merges.ptr(), static_cast<Py_ssize_t>(i));
      std::string_view a, b, whole;
      if (utf8_of(m, &whole)) {
        const size_t space = whole.find(' ');
        if (space == std::string_view::npos || whole.find(' ', space + 1) != std::string_view::npos) return py::none();
        a = whole.substr(0, space);
        b = whole.substr(space + 1);
      } else if (PyList_CheckExact(m) && PyList_GET_SIZE(m) == 2) {
        if (!utf8_of(PyList_GET_ITEM(m, 0), &a) || !utf8_of(PyList_GET_ITEM(m, 1), &b)) return py::none();
      } else {
        return py::none();
      }
      uint32_t ia, ib, im;
      if (!find(a, &ia) || !find(b, &ib)) return py::none();
      merged.assign(a);
      merged.append(!pre.empty() && b.substr(0, pre.size()) == pre ? b.substr(pre.size()) : b);
      if (!find(merged, &im)) return py::none();
      PyList_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(i), py::make_tuple(ia, ib, im).release().ptr());
    }
    return std::move(out);
  }, py::arg("vocab"), py::arg("merges"), py::arg("prefix"),
  "A BPE tokenizer.json's merges as [(left id, right id, merged id)], or None where conversion/"
  "hf_json.py's own loop must decide (it gives the same list, or the error).");

  m.def("precompiled_section", [](const py::bytes& charsmap) {
    try {
      return py::bytes(PrecompiledNormalizer(std::string(bytes_view(charsmap))).section_image());
    } catch (const std::invalid_argument& e) {
      throw py::value_error(e.what());
    }
  }, py::arg("charsmap"),
  "What a cartridge stores for a Precompiled normalizer: its lookup bitmaps, then the decoded charsmap.");

  m.def("hf_normalize", [](const py::list& normalizers, const py::str& text) {
    std::vector<ComponentDesc> descs;
    for (py::handle h : normalizers) descs.push_back(component_from(py::reinterpret_borrow<py::dict>(h)));
    const std::shared_ptr<const TextNormalizer> chain = make_normalizer(descs);
    std::string out(utf8_view(text));
    if (chain && !chain->is_identity(out)) {
      ByteRanges align;
      for (uint32_t i = 0; i < out.size(); ++i) align.emplace_back(i, i + 1);
      chain->apply(out, align);
    }
    return py::str(out.data(), out.size());
  }, py::arg("normalizers"), py::arg("text"),
  "Runs a flattened normalizer chain (as stored in a cartridge's META) on text.");

  py::class_<HfBatch, std::shared_ptr<HfBatch>>(m, "HfBatch")
      .def("__len__", [](const HfBatch& b) { return b.docs.size(); })
      .def("lengths", [](const HfBatch& b) {
        py::array_t<int64_t> out(b.docs.size());
        int64_t* o = out.mutable_data();
        for (size_t i = 0; i < b.docs.size(); ++i) o[i] = static_cast<int64_t>(b.docs[i].ids.size());
        return out;
      })
      .def("token_text", [](const HfBatch& b) {
        py::list out;
        for (size_t i = 0; i < b.docs.size(); ++i)
          for (auto& [k, s] : b.docs[i].token_text) out.append(py::make_tuple(i, k, py::str(s.data(), s.size())));
        return out;
      }, "[(document, token index, token string)] for added tokens whose string is not their content.")
      .def_property_readonly("complete", [](const HfBatch& b) { return b.complete; },
                             "False when documents were encoded ids-only or stopped at a limit.")
      .def("doc", [](const HfBatch& b, size_t i) {
        if (i >= b.docs.size()) throw py::index_error("document index out of range");
        if (!b.complete) throw py::value_error("this batch holds partial encodings; encode the text again");
        return raw_tuple(b.docs[i]);
      }, py::arg("i"), "Document i as HfEngine.encode returns it.")
      .def("assemble", [](const HfBatch& b, const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& keep,
                          bool keep_tail, const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& prefix,
                          const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& suffix,
                          int64_t sequence_type, const py::object& trim_lead, const py::object& trim_trail,
                          bool add_prefix_space, int64_t pad_length, bool pad_left, int64_t pad_id,
                          int64_t pad_type_id, size_t num_threads) -> py::object {
        const size_t nb = b.docs.size();
        Int64Array lead, trail;  // alive while layout points into them
        const BatchLayout layout = layout_from(b, keep, keep_tail, prefix, suffix, sequence_type, trim_lead, trim_trail,
                                               add_prefix_space, lead, trail);
        if (pad_length >= 0) {
          BatchPadding padding{static_cast<size_t>(pad_length), pad_left, pad_id, pad_type_id};
          for (size_t i = 0; i < nb; ++i)
            if (final_length(layout, i) > padding.length) throw py::value_error("a document is longer than pad_length");
          const size_t stride = nb * padding.length;
          py::array_t<int64_t> out({kEncodingRows, nb, padding.length});
          int64_t* o = out.mutable_data();
          {
            py::gil_scoped_release release;
            parallel_for(nb, num_threads, [&](size_t i) {
              const size_t n = final_length(layout, i);
              const size_t row = i * padding.length;
              write_document(b.docs[i], layout, i, o, stride, padding.left ? row + padding.length - n : row);
              write_padding(padding, n, o, stride, row);
            });
          }
          return out;
        }
        py::array_t<int64_t> bounds(nb + 1);
        int64_t* bd = bounds.mutable_data();
        bd[0] = 0;
        for (size_t i = 0; i < nb; ++i) bd[i + 1] = bd[i] + static_cast<int64_t>(final_length(layout, i));
        const size_t total = static_cast<size_t>(bd[nb]);
        py::array_t<int64_t> out({kEncodingRows, total});
        int64_t* o = out.mutable_data();
        {
          py::gil_scoped_release release;
          parallel_for(nb, num_threads, [&](size_t i) { write_document(b.docs[i], layout, i, o, total, bd[i]); });
        }
        return py::make_tuple(out, bounds);
      }, py::arg("keep"), py::arg("keep_tail"), py::arg("prefix"), py::arg("suffix"), py::arg("sequence_type"),
      py::arg("trim_lead"), py::arg("trim_trail"), py::arg("add_prefix_space"), py::arg("pad_length"),
      py::arg("pad_left"), py::arg("pad_id"), py::arg("pad_type_id"), py::arg("num_threads") = 0,
      "The batch's final encodings: (7, B, pad_length) when pad_length >= 0, else ((7, total), bounds).")
      .def("take_flat", [](HfBatch& b, const Int64Array& keep, bool keep_tail, const Int64Array& prefix,
                           const Int64Array& suffix, const py::object& trim_lead, const py::object& trim_trail,
                           bool add_prefix_space, size_t num_threads) -> py::tuple {
        // encode_batch_to_numpy's arrays straight from the raw encodings: 20 bytes per token
        // (ids, offsets) where assemble's (7, total) block takes 56 and flat() copies it again,
        // and each document's raw encoding is freed as soon as it is written.
        const size_t nb = b.docs.size();
        Int64Array lead, trail;
        const BatchLayout layout = layout_from(b, keep, keep_tail, prefix, suffix, -1, trim_lead, trim_trail,
                                               add_prefix_space, lead, trail);
        py::array_t<int64_t> bounds(nb + 1);
        int64_t* bd = bounds.mutable_data();
        bd[0] = 0;
        for (size_t i = 0; i < nb; ++i) bd[i + 1] = bd[i] + static_cast<int64_t>(final_length(layout, i));
        const size_t total = static_cast<size_t>(bd[nb]);
        py::array_t<uint32_t> ids(total);
        py::array_t<int64_t> offsets({total, size_t{2}});
        uint32_t* id_out = ids.mutable_data();
        int64_t* offset_out = offsets.mutable_data();
        {
          py::gil_scoped_release release;
          parallel_for(nb, num_threads, [&](size_t i) {
            write_document_flat(b.docs[i], layout, i, id_out, offset_out, static_cast<size_t>(bd[i]));
            b.docs[i] = RawEncoding();
          });
        }
        return py::make_tuple(ids, offsets, bounds);
      }, py::arg("keep"), py::arg("keep_tail"), py::arg("prefix"), py::arg("suffix"), py::arg("trim_lead"),
      py::arg("trim_trail"), py::arg("add_prefix_space"), py::arg("num_threads") = 0,
      "(ids uint32, offsets int64 (total, 2), bounds) as assemble(...) then flat() give them, without "
      "padding; empties the batch (every document's raw encoding is freed as it is written).");

  py::class_<PyHfEngine>(m, "HfEngine")
      .def(py::init<const py::object&, const py::list&, const py::list&, const py::object&, const py::object&>(),
           py::arg("cartridge"), py::arg("normalizers"), py::arg("pre_tokenizers"), py::arg("added_raw"),
           py::arg("added_normalized"),
           "added_raw and added_normalized both None: use the added tokens compiled into the cartridge.")
      .def("info", [](const PyHfEngine& pe) { return cartridge_info(pe.unchecked().cartridge()); })
      .def("ready", [](const PyHfEngine& pe) { (void)*pe; }, "Runs the checks deferred from load now (ValueError on a damaged file).")
      .def_property_readonly("n_ids", [](const PyHfEngine& pe) { return pe.unchecked().n_ids(); })
      .def_property_readonly("byte_level", [](const PyHfEngine& pe) { return pe.unchecked().is_byte_level(); },
                             "Whether the model is byte-level BPE (the cartridge then has the ByteLevel decode table).")
      .def_property_readonly("has_fast_path", [](const PyHfEngine& pe) { return pe.unchecked().has_fast_path(); },
                             "True when the merge list runs on the linear-time backtracking encoder.")
      .def_property_readonly("fast_rank_step", [](const PyHfEngine& pe) -> py::object {
        const int64_t step = (*pe).fast_rank_step();
        return step < 0 ? py::none() : py::object(py::int_(step));
      }, "k when every id of the backtracking encoder is its rank plus k (no map read), else None.")
      .def("token_string", [](const PyHfEngine& pe, int64_t id) -> py::object {
        const HfEngine& e = *pe;
        if (id < 0 || id >= e.token_string_count()) throw py::index_error("token id out of range");
        std::string_view s;
        if (!e.token_string(static_cast<uint32_t>(id), &s)) return py::none();
        return py::str(s.data(), s.size());
      }, "The string encodings show for id, from the cartridge's VSTI (None where the id has none).")
      .def("token_strings", [](const PyHfEngine& pe, const py::list& ids) {
        const HfEngine& e = *pe;
        py::list out(ids.size());
        size_t k = 0;
        for (py::handle h : ids) {
          const int64_t id = py::cast<int64_t>(h);
          if (id < 0 || id >= e.token_string_count()) throw py::index_error("token id out of range");
          std::string_view s;
          out[k++] = e.token_string(static_cast<uint32_t>(id), &s) ? py::object(py::str(s.data(), s.size()))
                                                                   : py::object(py::none());
        }
        return out;
      }, "token_string for each id of a list.")
      .def_property_readonly("token_string_count", [](const PyHfEngine& pe) {
        return pe.unchecked().has_token_strings() ? py::object(py::int_(pe.unchecked().token_string_count()))
                                                  : py::object(py::none());
      }, "How many ids VSTI covers; None when the cartridge has no VSTI.")
      .def("section", [](const PyHfEngine& pe, const std::string& id) {
        if (id.size() != 4) throw py::value_error("section ids have 4 characters");
        const uint32_t f = static_cast<uint32_t>(static_cast<uint8_t>(id[0])) | static_cast<uint32_t>(static_cast<uint8_t>(id[1])) << 8 |
                           static_cast<uint32_t>(static_cast<uint8_t>(id[2])) << 16 | static_cast<uint32_t>(static_cast<uint8_t>(id[3])) << 24;
        const Cartridge& c = pe.unchecked().cartridge();
        if (!c.find(f)) return py::object(py::none());
        const std::string_view b = c.bytes(f);
        return py::object(py::bytes(b.data(), b.size()));
      })
      .def("encode", [](const PyHfEngine& pe, const py::str& text, bool encode_special_tokens) {
        const std::string_view t = utf8_view(text);
        RawEncoding r;
        {
          ReleaseGilUnlessShort gil(t.size());
          pe->encode(t, encode_special_tokens, r);
        }
        return raw_to_python(t, r);
      }, py::arg("text"), py::arg("encode_special_tokens") = false,
      "One sequence up to the model: (ids uint32, char offsets int64 (n, 2), word ids int64, "
      "[(token index, token string)] for added tokens whose string is not their content).")
      .def("encode_batch", [](const PyHfEngine& pe, const py::list& texts, bool encode_special_tokens, size_t num_threads) {
        const std::vector<std::string_view> views = utf8_views(texts);
        std::vector<RawEncoding> out(views.size());
        Interrupts interrupts;
        {
          py::gil_scoped_release release;
          parallel_for(views.size(), num_threads, [&](size_t i) {
            if (!interrupts.stop()) pe->encode(views[i], encode_special_tokens, out[i]);
          });
        }
        interrupts.raise_if_stopped();
        py::list result(views.size());
        for (size_t i = 0; i < out.size(); ++i) result[i] = raw_to_python(views[i], out[i]);
        return result;
      }, py::arg("texts"), py::arg("encode_special_tokens") = false, py::arg("num_threads") = 0)
      .def("encode_batch_raw", [](const PyHfEngine& pe, const py::list& texts, bool encode_special_tokens, size_t num_threads,
                                  bool offsets, int64_t limit) {
        const std::vector<std::string_view> views = utf8_views(texts);
        auto batch = std::make_shared<HfBatch>();
        batch->docs.resize(views.size());
        batch->complete = limit < 0 && offsets;
        Interrupts interrupts;
        {
          py::gil_scoped_release release;
          parallel_for(views.size(), num_threads, [&](size_t i) {
            if (interrupts.stop()) return;
            RawEncoding& r = batch->docs[i];
            r.with_offsets = offsets;
            if (limit >= 0) r.limit = static_cast<size_t>(limit);
            pe->encode(views[i], encode_special_tokens, r);
            if (offsets) to_char_offsets(views[i], r.starts, r.ends);
          });
        }
        interrupts.raise_if_stopped();
        return batch;
      }, py::arg("texts"), py::arg("encode_special_tokens") = false, py::arg("num_threads") = 0,
      py::arg("offsets") = true, py::arg("limit") = -1,
      "Every text up to the model, kept natively as an HfBatch (char offsets). offsets=False: ids "
      "only (offsets 0, words -1); limit >= 0: each document may stop after its first `limit` "
      "tokens (exact prefix; see RawEncoding). Such a batch is not `complete`.")
      .def("encode_batch_flat_ids", [](const PyHfEngine& pe, const py::list& texts, bool encode_special_tokens,
                                       size_t num_threads, int64_t limit, int64_t max_keep, bool keep_tail,
                                       const Int64Array& prefix, const Int64Array& suffix) -> py::tuple {
        // encode_batch_raw(offsets=False) and take_flat in one pass: the calling thread, between
        // documents of its own, appends each run of finished documents (in order) to the ids and
        // frees their raw encodings, as encode_batch_id_lists builds its lists, so on several
        // threads the ids are not a serial pass after the last document (10,000 short documents
        // on two threads: 49-51 -> 43-46 ms). With offsets the same streaming measured slower, one
        // thread or two (16 bytes a token written between documents push the engine's tables out
        // of the caches), so offsets keep encode_batch_raw and take_flat. Plain memory, no GIL.
        const std::vector<std::string_view> views = utf8_views(texts);
        const size_t n = views.size();
        Int64Array no_lead, no_trail;
        BatchLayout layout = layout_shell(keep_tail, prefix, suffix, -1, py::none(), py::none(), false, no_lead,
                                          no_trail);
        layout.keep.assign(n, 0);
        std::vector<RawEncoding> docs(n);
        FlatIds flat(n, total_bytes(views), layout.prefix.cols + layout.suffix.cols);
        InOrder order(n);
        bool cut = false;  // some document had more than max_keep tokens
        auto write_ready = [&] {
          flat.size_at_first(order, [&](size_t i) { return views[i].size(); },
                             [&](size_t i) { return docs[i].ids.size(); });
          order.take([&](size_t i) {
            RawEncoding& r = docs[i];
            size_t keep = r.ids.size();
            if (max_keep >= 0 && keep > static_cast<size_t>(max_keep)) {
              keep = static_cast<size_t>(max_keep);
              cut = true;
            }
            layout.keep[i] = static_cast<int64_t>(keep);
            write_document_flat(r, layout, i, flat.append(i, layout.prefix.cols + keep + layout.suffix.cols),
                                nullptr, 0);
            r = RawEncoding();
          });
        };
        const HfEngine& engine = *pe;
        Interrupts interrupts;
        {
          py::gil_scoped_release release;
          parallel_for(n, num_threads, [&](size_t i) {
            if (interrupts.stop()) return;
            RawEncoding& r = docs[i];
            r.with_offsets = false;
            if (limit >= 0) r.limit = static_cast<size_t>(limit);
            engine.encode(views[i], encode_special_tokens, r);
            order.mark(i);
            if (order.on_caller()) write_ready();
          });
          if (!interrupts.stop()) write_ready();
        }
        interrupts.raise_if_stopped();
        auto [ids, bounds] = flat.release();
        return py::make_tuple(ids, bounds, cut);
      }, py::arg("texts"), py::arg("encode_special_tokens"), py::arg("num_threads"), py::arg("limit"),
      py::arg("max_keep"), py::arg("keep_tail"), py::arg("prefix"), py::arg("suffix"),
      "encode_batch_raw(texts, ..., offsets=False, limit) then take_flat's ids, each document keeping "
      "at most max_keep tokens (-1: all; its last ones with keep_tail), written as the batch is "
      "encoded: (ids uint32, bounds int64, whether any document was cut).")
      .def("decode_byte_level", [](const PyHfEngine& pe, const py::handle& ids, const py::bytes& skip) {
        const std::vector<uint32_t> v = ids_from(ids);
        // The mask is read in place: one byte per id of the vocabulary (151 KB for qwen2_5), which
        // a copy per call made 8.5 us of a three-token decode (tokenizers: 0.74).
        const std::string_view mask = bytes_view(skip);
        std::string out;
        {
          py::gil_scoped_release release;
          pe->decode_byte_level(v.data(), v.size(), mask, out);
        }
        return py::bytes(out);
      }, py::arg("ids"), py::arg("skip"),
      "The ByteLevel decoder's bytes for ids (ids without a token dropped; skip[id] == 1 skipped).")
      .def("model_encode", [](const PyHfEngine& pe, const py::bytes& piece, bool reference) {
        const std::string_view b = bytes_view(piece);
        std::vector<HfToken> out;
        if (!b.empty()) {
          const auto* p = reinterpret_cast<const uint8_t*>(b.data());
          if (reference && pe->bpe() == nullptr) throw py::value_error("reference=True needs a BPE model");
          if (reference) pe->bpe()->encode_word_merging(p, b.size(), out);
          else pe->model().encode_word(p, b.size(), out);
        }
        py::list ids;
        for (const HfToken& t : out) ids.append(py::make_tuple(t.id, t.start, t.end));
        return ids;
      }, py::arg("piece"), py::arg("reference") = false,
      "The model alone on one piece's bytes: [(id, start, end)]. reference=True runs the plain "
      "merge-list loop (the oracle of the fast paths).")
      .def("encode_id_list", [](const PyHfEngine& pe, const py::str& text, bool encode_special_tokens,
                                const py::list& before, const py::list& after, int64_t limit) {
        return hf_id_list(*pe, text, encode_special_tokens, before, after, limit);
      }, py::arg("text"), py::arg("encode_special_tokens") = false, py::arg("before") = py::list(),
      py::arg("after") = py::list(), py::arg("limit") = -1,
      "One sequence up to the model, ids only, as a list of ints (the ids of encode()), between the\n"
      "ints of `before` and `after` (a post-processor's fixed prefix and suffix). With limit >= 0 the\n"
      "engine may stop once it has that many: the ids are then the first ones of the whole text's.")
      .def("encode_lazy", [](const PyHfEngine& pe, const py::str& text, const py::tuple& spec) {
        // One tuple, not five arguments: pybind11's dispatcher was a seventh of a short text's call.
        PyObject* const* s = &PyTuple_GET_ITEM(spec.ptr(), 0);
        if (spec.size() != 5 || !PyBool_Check(s[0]) || !PyList_Check(s[1]) || !PyList_Check(s[2]))
          throw py::type_error("spec must be (encode_special_tokens, before, after, cls, build)");
        py::list ids = hf_id_list(*pe, text, s[0] == Py_True, py::reinterpret_borrow<py::list>(s[1]),
                                  py::reinterpret_borrow<py::list>(s[2]), -1);
        return py::reinterpret_steal<py::object>(make_lazy_encoding(s[3], s[4], std::move(ids), text));
      }, py::arg("text"), py::arg("spec"),
      "Encoding._lazy(encode_id_list(text, encode_special_tokens, before, after), build, text) with\n"
      "cls for Encoding, in one call (Tokenizer.encode's common case); spec is\n"
      "(encode_special_tokens, before, after, cls, build).")
      .def("encode_batch_id_lists", [](const PyHfEngine& pe, const py::list& texts, bool encode_special_tokens,
                                       size_t num_threads, const py::list& before, const py::list& after,
                                       const py::object& lazy) {
        // As encode_tiktoken_batch_lists: the calling thread turns finished texts into lists (under
        // the GIL, in runs of kRun) while the others encode, so the lists are not a serial tail.
        // With `lazy`, it makes each text's lazy Encoding there too (LazyEncodings).
        const std::optional<LazyEncodings> encodings =
            lazy.is_none() ? std::nullopt : std::optional<LazyEncodings>(LazyEncodings(lazy));
        const std::vector<std::string_view> views = utf8_views(texts);
        const size_t n = views.size();
        constexpr size_t kRun = 32;
        std::vector<RawEncoding> out(n);
        py::list result(n);
        InOrder order(n);
        auto build_ready = [&] {  // needs the GIL
          const GcPause pause;
          order.take([&](size_t i) {
            const RawEncoding& r = out[i];
            py::list ids = PyEngine::id_list(before, r.ids.data(), r.ids.size(), after);
            PyObject* item = encodings ? encodings->make(std::move(ids), PyList_GET_ITEM(texts.ptr(), i))
                                       : ids.release().ptr();
            PyList_SET_ITEM(result.ptr(), static_cast<Py_ssize_t>(i), item);
            out[i] = RawEncoding();
          });
        };
        const HfEngine& engine = *pe;
        Interrupts interrupts;
        {
          py::gil_scoped_release release;
          parallel_for(n, num_threads, [&](size_t i) {
            if (interrupts.stop()) return;
            out[i].with_offsets = false;
            engine.encode(views[i], encode_special_tokens, out[i]);
            order.mark(i);
            if (!order.on_caller() || !order.run_ready(kRun)) return;
            py::gil_scoped_acquire gil;
            build_ready();
          });
        }
        interrupts.raise_if_stopped();
        build_ready();
        return result;
      }, py::arg("texts"), py::arg("encode_special_tokens") = false, py::arg("num_threads") = 0,
      py::arg("before") = py::list(), py::arg("after") = py::list(), py::arg("lazy") = py::none(),
      "encode_id_list for every text, on native threads without the GIL. lazy=(Encoding, build):\n"
      "each text's Encoding._lazy(ids, build, text) instead of its list, made as the lists are.")
      .def("encode_ids", [](const PyHfEngine& pe, const py::str& text, bool encode_special_tokens) {
        const std::string_view t = utf8_view(text);
        RawEncoding r;
        r.with_offsets = false;  // ids only
        {
          ReleaseGilUnlessShort gil(t.size());
          pe->encode(t, encode_special_tokens, r);
        }
        return to_numpy(std::move(r.ids));
      }, py::arg("text"), py::arg("encode_special_tokens") = false)
      .def("count", [](const PyHfEngine& pe, const py::str& text, bool encode_special_tokens) {
        const std::string_view t = utf8_view(text);
        ReleaseGilUnlessShort gil(t.size());
        RawEncoding r;
        r.with_offsets = false;  // ids only: a count needs no offsets
        pe->encode(t, encode_special_tokens, r);
        return r.ids.size();
      }, py::arg("text"), py::arg("encode_special_tokens") = false,
      "len(encode_ids(text)): the model's tokens of text, before the post-processor.")
      .def("count_batch", [](const PyHfEngine& pe, const py::list& texts, bool encode_special_tokens, size_t num_threads) {
        const std::vector<std::string_view> views = utf8_views(texts);
        py::array_t<int64_t> counts(static_cast<py::ssize_t>(views.size()));
        int64_t* c = counts.mutable_data();
        Interrupts interrupts;
        {
          py::gil_scoped_release release;
          parallel_for(views.size(), num_threads, [&](size_t i) {
            if (interrupts.stop()) return;
            thread_local RawEncoding r;
            r.with_offsets = false;  // ids only: a count needs no offsets
            pe->encode(views[i], encode_special_tokens, r);
            c[i] = static_cast<int64_t>(r.ids.size());
            if (r.ids.capacity() > (size_t{1} << 22)) r = RawEncoding();
          });
        }
        interrupts.raise_if_stopped();
        return counts;
      }, py::arg("texts"), py::arg("encode_special_tokens") = false, py::arg("num_threads") = 0,
      "count() of every text, in parallel (int64 array).");
}

// split_pieces' modes by name; one the CPU lacks is refused rather than quietly run as another.
constexpr std::pair<const char*, PieceBlocks::Mode> kBlockModes[] = {
    {"auto", PieceBlocks::Mode::kAuto},         {"avx512", PieceBlocks::Mode::kAvx512},
    {"avx2", PieceBlocks::Mode::kAvx2},         {"sse2", PieceBlocks::Mode::kSse2},
    {"portable", PieceBlocks::Mode::kPortable}, {"scalar", PieceBlocks::Mode::kScalar}};

PieceBlocks::Mode block_mode(const std::string& name) {
  for (const auto& [n, mode] : kBlockModes) {
    if (name != n) continue;
    if (!PieceBlocks::available(mode)) throw py::value_error("mode '" + name + "' is not available on this CPU or build (see block_modes())");
    return mode;
  }
  throw py::value_error("mode must be 'auto', 'avx512', 'avx2', 'sse2', 'portable' or 'scalar', not '" + name + "'");
}

}  // namespace

void bind_trainer(py::module_& m);  // bindings_train.cc

// `data` as a read-only numpy view whose base keeps `owner` alive.
template <class T>
py::array view_of(const T* data, std::vector<py::ssize_t> shape, const py::object& owner) {
  py::array a(py::dtype::of<T>(), std::move(shape), data, owner);
  py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return a;
}

// A writable, C-contiguous uint8 buffer of at least `n` bytes (what an allocator handed back).
// What mark_batch returns for a batch it marked: (n_bytes, doc_bytes, specials, info), info
// holding mark_ms beside what the caller put in it.
py::tuple marked_tuple(uint64_t n_bytes, const MarkedBatch& b, py::dict info) {
  py::array_t<uint64_t> doc_bytes(static_cast<py::ssize_t>(b.doc_bytes.size()));
  std::copy(b.doc_bytes.begin(), b.doc_bytes.end(), doc_bytes.mutable_data());
  py::array_t<uint32_t> specials({static_cast<py::ssize_t>(b.specials.size()), py::ssize_t{2}});
  for (size_t i = 0; i < b.specials.size(); ++i) {
    specials.mutable_data()[2 * i] = b.specials[i].pos;
    specials.mutable_data()[2 * i + 1] = b.specials[i].id;
  }
  info["mark_ms"] = b.mark_ms;
  return py::make_tuple(n_bytes, doc_bytes, specials, info);
}

uint8_t* writable_bytes(const py::handle& h, uint64_t n, const char* what) {
  auto a = py::array_t<uint8_t, py::array::c_style>::ensure(h);
  if (!a || !a.writeable() || static_cast<uint64_t>(a.size()) < n || py::array(a).ptr() != h.ptr()) {
    throw py::type_error(std::string(what) + " must be a writable, contiguous uint8 array of the batch's size");
  }
  return a.mutable_data();
}

// The batch stages (engines/piece_batch.h) for Python: the CUDA module's pre-tokenization and
// CPU hand-offs, and the host loop that runs every stage on the CPU for the tests.
void bind_piece_batches(py::module_& m) {
  m.attr("device_piece_max") = kDevicePieceMax;
  auto engine = py::reinterpret_borrow<py::class_<PyEngine>>(m.attr("TiktokenEngine"));
  engine.def("mark_batch", [](const PyEngine& pe, const py::list& texts, const py::bytes& allowed, const py::bytes& disallowed, size_t num_threads, bool ordinary, const py::object& alloc) -> py::tuple {
        const std::vector<std::string_view> views = utf8_views(texts);
        const uint64_t n_bytes = batch_bytes(views);
        const py::tuple bufs = alloc(n_bytes);
        uint8_t* text = writable_bytes(bufs[0], n_bytes, "the text buffer");
        uint8_t* marks = writable_bytes(bufs[1], n_bytes, "the marks buffer");
        const std::vector<uint8_t> allow = mask_from(allowed);
        const std::vector<uint8_t> deny = mask_from(disallowed);
        MarkedBatch b;
        {
          py::gil_scoped_release release;
          b = mark_batch(*pe, views, allow, deny, ordinary, num_threads, text, marks);
        }
        if (b.denied_text >= 0) return py::make_tuple(b.denied_text, b.denied_special);
        return marked_tuple(n_bytes, b, py::dict());
      }, py::arg("texts"), py::arg("allowed"), py::arg("disallowed"), py::arg("num_threads"), py::arg("ordinary"), py::arg("alloc"),
      "Pre-tokenizes texts for the batch stages: alloc(n_bytes) returns (text, marks) uint8 buffers, "
      "which get the batch's bytes and one piece mark per byte. Returns (n_bytes, doc_bytes uint64, "
      "specials (n, 2) uint32 of (byte, id), timings), or (text index, special index) as encode_batch.")
      .def("encode_pieces", [](const PyEngine& pe, py::array_t<uint8_t, py::array::c_style | py::array::forcecast> text, py::array_t<uint32_t, py::array::c_style | py::array::forcecast> starts, py::array_t<uint32_t, py::array::c_style | py::array::forcecast> lens, size_t num_threads) {
        const size_t n = static_cast<size_t>(starts.size());
        if (static_cast<size_t>(lens.size()) != n) throw py::value_error("starts and lens differ in length");
        for (size_t k = 0; k < n; ++k) {
          if (uint64_t{starts.data()[k]} + lens.data()[k] > static_cast<uint64_t>(text.size()) || lens.data()[k] == 0) {
            throw py::index_error("piece outside the text");
          }
        }
        std::vector<int32_t> counts;
        std::vector<uint32_t> ids;
        without_gil([&] { encode_reference(*pe, text.data(), starts.data(), lens.data(), n, num_threads, counts, ids); });
        py::array_t<int32_t> c(static_cast<py::ssize_t>(counts.size()));
        std::copy(counts.begin(), counts.end(), c.mutable_data());
        py::array_t<uint32_t> v(static_cast<py::ssize_t>(ids.size()));
        std::copy(ids.begin(), ids.end(), v.mutable_data());
        return py::make_tuple(c, v);
      }, py::arg("text"), py::arg("starts"), py::arg("lens"), py::arg("num_threads") = 0,
      "The CPU engine's encoding of the pieces text[starts[i]:starts[i] + lens[i]]: (counts int32, "
      "their ids concatenated uint32).")
      .def("encode_batch_staged", [](const PyEngine& pe, const py::list& texts, const py::bytes& allowed, const py::bytes& disallowed, size_t num_threads, bool ordinary) -> py::tuple {
        const std::vector<std::string_view> views = utf8_views(texts);
        const std::vector<uint8_t> allow = mask_from(allowed);
        const std::vector<uint8_t> deny = mask_from(disallowed);
        std::vector<uint32_t> ids;
        std::vector<int64_t> offsets;
        MarkedBatch info;
        without_gil([&] { encode_batch_staged(*pe, views, allow, deny, ordinary, num_threads, ids, offsets, info); });
        if (info.denied_text >= 0) return py::make_tuple(info.denied_text, info.denied_special);
        py::array_t<uint32_t> ids_arr(static_cast<py::ssize_t>(ids.size()));
        std::copy(ids.begin(), ids.end(), ids_arr.mutable_data());
        py::array_t<int64_t> off_arr(static_cast<py::ssize_t>(offsets.size()));
        std::copy(offsets.begin(), offsets.end(), off_arr.mutable_data());
        return py::make_tuple(ids_arr, off_arr);
      }, py::arg("texts"), py::arg("allowed"), py::arg("disallowed"), py::arg("num_threads"), py::arg("ordinary"),
      "encode_batch_to_numpy through the batch stages of the CUDA engine run on CPU threads (the "
      "host loop, engines/piece_batch.h): the same result, for checking the stages without a GPU.")
      .def("run_stages", [](const PyEngine& pe, py::array_t<uint8_t, py::array::c_style | py::array::forcecast> text,
                            py::array_t<uint8_t, py::array::c_style | py::array::forcecast> marks,
                            py::array_t<uint64_t, py::array::c_style | py::array::forcecast> doc_bytes,
                            py::array_t<uint32_t, py::array::c_style | py::array::forcecast> specials, size_t num_threads) {
        MarkedBatch b;
        b.doc_bytes.assign(doc_bytes.data(), doc_bytes.data() + doc_bytes.size());
        if (b.doc_bytes.empty() || b.doc_bytes.front() != 0 || !std::is_sorted(b.doc_bytes.begin(), b.doc_bytes.end()) ||
            b.doc_bytes.back() != static_cast<uint64_t>(text.size()) || marks.size() != text.size()) {
          throw py::value_error("doc_bytes must rise from 0 to the text's size, and marks be as long as the text");
        }
        for (size_t d = 0; d + 1 < b.doc_bytes.size(); ++d) {
          if (b.doc_bytes[d] < b.doc_bytes[d + 1] && marks.data()[b.doc_bytes[d]] == kMarkInside) {
            throw py::value_error("a document whose first byte starts no piece");
          }
        }
        if (specials.ndim() != 2 || specials.shape(1) != 2) throw py::value_error("specials must be (n, 2)");
        for (py::ssize_t i = 0; i < specials.shape(0); ++i) {
          const uint32_t pos = specials.at(i, 0);
          if (pos >= static_cast<uint64_t>(text.size()) || marks.data()[pos] != kMarkSpecial) {
            throw py::value_error("a special token where the marks have none");
          }
          b.specials.push_back(SpecialAt{pos, specials.at(i, 1)});
        }
        std::vector<uint32_t> ids;
        std::vector<int64_t> offsets;
        without_gil([&] { run_stages_on_host(*pe, text.data(), marks.data(), b, num_threads, ids, offsets); });
        py::array_t<int64_t> off(static_cast<py::ssize_t>(offsets.size()));
        std::copy(offsets.begin(), offsets.end(), off.mutable_data());
        return py::make_tuple(to_numpy(std::move(ids)), off);
      }, py::arg("text"), py::arg("marks"), py::arg("doc_bytes"), py::arg("specials"), py::arg("num_threads") = 0,
      "Every stage after marking on CPU threads, for a batch mark_batch marked: (ids, offsets), what the "
      "CUDA module's DeviceEngine.encode returns (tests stand it in for a GPU).")
      .def("piece_tables", [](py::object self) {
        const PyEngine& pe = self.cast<const PyEngine&>();
        const piece::PieceTables& t = pe->piece_tables();
        py::dict d;
        d["n_ids"] = t.n_ids;
        d["trie_units"] = view_of(t.trie_units, {static_cast<py::ssize_t>(t.trie_size) * 2}, self);
        d["trie_values"] = view_of(t.trie_values, {static_cast<py::ssize_t>(t.trie_size)}, self);
        d["token_offsets"] = view_of(t.token_offsets, {static_cast<py::ssize_t>(t.n_ids) + 1}, self);
        d["byte_rank"] = view_of(t.byte_rank, {256}, self);
        if (t.split_left != nullptr) {
          d["split_left"] = view_of(t.split_left, {static_cast<py::ssize_t>(t.n_ids)}, self);
          d["split_right"] = view_of(t.split_right, {static_cast<py::ssize_t>(t.n_ids)}, self);
          d["pairs"] = view_of(reinterpret_cast<const uint32_t*>(t.pairs), {static_cast<py::ssize_t>(t.pair_capacity) * 3}, self);
          if (t.slow != nullptr) d["slow"] = view_of(t.slow, {static_cast<py::ssize_t>(t.n_ids)}, self);
          if (t.bloom != nullptr) d["bloom"] = view_of(t.bloom, {static_cast<py::ssize_t>((t.bloom_mask + 1) / 64)}, self);
        }
        return d;
      }, "The per-piece encoder's tables (models/piece_encoder.h) as read-only numpy views of the "
         "cartridge, for copying to a GPU.");

  // The tokenizers face on the batch stages (engines/piece_batch.h: mark_hf_batch, hf_raw_batch).
  py::class_<HfMarkedBatch, std::shared_ptr<HfMarkedBatch>>(m, "HfMarkedBatch",
      "A batch marked by HfEngine.mark_batch, kept for HfEngine.raw_from_pieces.");
  auto hf = py::reinterpret_borrow<py::class_<PyHfEngine>>(m.attr("HfEngine"));
  hf.def("piece_engine", [](const PyHfEngine& pe) -> py::object {
        std::shared_ptr<const TiktokenEngine> fast = pe->piece_engine();
        if (!fast) return py::none();
        return py::cast(std::make_unique<PyEngine>(std::move(fast)));
      }, "The TiktokenEngine whose ranks the batch stages make of this tokenizer's pieces, or None "
         "where the stages do not apply (see HfEngine::piece_engine).")
      .def("mark_batch", [](const PyHfEngine& pe, const py::list& texts, bool encode_special_tokens, size_t num_threads,
                            const py::object& alloc) -> py::tuple {
        if (!pe->piece_engine()) throw py::value_error("this tokenizer has no path through the batch stages");
        const std::vector<std::string_view> views = utf8_views(texts);
        const uint64_t n_bytes = batch_bytes(views);
        const py::tuple bufs = alloc(n_bytes);
        uint8_t* text = writable_bytes(bufs[0], n_bytes, "the text buffer");
        uint8_t* marks = writable_bytes(bufs[1], n_bytes, "the marks buffer");
        auto marked = std::make_shared<HfMarkedBatch>();
        without_gil([&] { *marked = mark_hf_batch(*pe, views, encode_special_tokens, num_threads, text, marks); });
        py::dict info;
        info["marked"] = marked;
        return marked_tuple(n_bytes, marked->batch, info);
      }, py::arg("texts"), py::arg("encode_special_tokens"), py::arg("num_threads"), py::arg("alloc"),
      "TiktokenEngine.mark_batch for this face: (n_bytes, doc_bytes, specials, info), where an added "
      "token's special id is n_ranks + its index and info['marked'] is what raw_from_pieces needs.")
      .def("raw_from_pieces", [](const PyHfEngine& pe, const py::list& texts, const HfMarkedBatch& marked,
                                 py::array_t<uint32_t, py::array::c_style | py::array::forcecast> values,
                                 py::array_t<int64_t, py::array::c_style | py::array::forcecast> doc_offsets,
                                 size_t num_threads, bool offsets, int64_t limit) {
        const std::vector<std::string_view> views = utf8_views(texts);
        if (static_cast<size_t>(doc_offsets.size()) != views.size() + 1) throw py::value_error("doc_offsets needs one entry per text, plus one");
        auto batch = std::make_shared<HfBatch>();
        batch->complete = false;
        without_gil([&] {
          hf_raw_batch(*pe, views, marked, values.data(), static_cast<uint64_t>(values.size()), doc_offsets.data(),
                       offsets, limit, num_threads, batch->docs);
        });
        return batch;
      }, py::arg("texts"), py::arg("marked"), py::arg("values"), py::arg("doc_offsets"), py::arg("num_threads"),
      py::arg("offsets") = true, py::arg("limit") = -1,
      "encode_batch_raw's HfBatch from the stages' output for a batch marked by mark_batch (not complete: "
      "word indexes are 0).")
      .def("encode_batch_raw_staged", [](const PyHfEngine& pe, const py::list& texts, bool encode_special_tokens,
                                         size_t num_threads, bool offsets, int64_t limit) {
        if (!pe->piece_engine()) throw py::value_error("this tokenizer has no path through the batch stages");
        const std::vector<std::string_view> views = utf8_views(texts);
        auto batch = std::make_shared<HfBatch>();
        batch->complete = false;
        without_gil([&] {
          const uint64_t n_bytes = batch_bytes(views);
          std::vector<uint8_t> text(n_bytes), marks(n_bytes);
          const HfMarkedBatch m = mark_hf_batch(*pe, views, encode_special_tokens, num_threads, text.data(), marks.data());
          std::vector<uint32_t> values;
          std::vector<int64_t> doc_offsets;
          run_stages_on_host(*pe->piece_engine(), text.data(), marks.data(), m.batch, num_threads, values, doc_offsets);
          hf_raw_batch(*pe, views, m, values.data(), values.size(), doc_offsets.data(), offsets, limit, num_threads,
                       batch->docs);
        });
        return batch;
      }, py::arg("texts"), py::arg("encode_special_tokens") = false, py::arg("num_threads") = 0,
      py::arg("offsets") = true, py::arg("limit") = -1,
      "encode_batch_raw through the CUDA engine's batch stages run on CPU threads (the host loop): the "
      "same encodings, for checking the tokenizers face's GPU path without a GPU.");
}

PYBIND11_MODULE(_crayon, m) {
  bind_trainer(m);
  m.doc() = "crayon-hf native engine";
  bind_hf(m);
  py::register_exception<CartridgeError>(m, "CartridgeError", PyExc_ValueError);

  m.def("pool_workers", [] { return pool_workers(); },
        "Worker threads the batch pool of this process has started (0 in a forked child until its "
        "first parallel batch): the pool's threads are kept between calls.");

  m.def("engine_tags_skip_to_last_tag", [] {
    ShortPieceCache::local().skip_to_last_tag();
    thread_scratch<BacktrackScratch>().memo_tags.skip_to_last_tag();
  }, "Tests only: the calling thread's per-thread caches hand their last engine tag to the next new engine.");
  m.def("xxhash64", [](const py::bytes& data, uint64_t seed) {
    std::string_view v = bytes_view(data);
    return xxhash64(v.data(), v.size(), seed);
  }, py::arg("data"), py::arg("seed") = 0, "XXH64 of data (the cartridge checksum function).");

  m.def("split_pieces", [](const std::string& pattern, const py::str& text, const std::string& mode) {
    // Besides the tiktoken patterns: "qwen2" (Llama 3's with single digits, Qwen2's Split) and
    // "deepseek_v3" (DeepSeek-V3's three Splits streamed as one).
    PieceBlocks::Pattern bp = PieceBlocks::Pattern::kR50k;
    const bool whole = pattern == "none";
    if (pattern == "qwen2") bp = PieceBlocks::Pattern::kQwen2;
    else if (pattern == "deepseek_v3") bp = PieceBlocks::Pattern::kDeepSeekV3;
    else if (!whole) PieceBlocks::pattern_of(pattern_from_name(pattern), bp);
    const PieceBlocks::Mode m = block_mode(mode);
    std::string_view t = utf8_view(text);
    std::vector<std::pair<uint32_t, uint32_t>> out;
    {
      py::gil_scoped_release release;
      if (whole) {
        split_pieces(SplitPattern::kNone, t, out);
      } else {
        PieceBlocks blocks(bp, t, m);
        for (size_t start = 0, end = 0; blocks.next(start, end);) {
          out.emplace_back(static_cast<uint32_t>(start), static_cast<uint32_t>(end));
        }
      }
    }
    return out;
  }, py::arg("pattern"), py::arg("text"), py::arg("mode") = "auto",
     "Pre-token byte ranges of text under a native split pattern. mode: 'auto' (block scanner where the "
     "pattern has one, as the engines run it), 'avx512', 'avx2' or 'sse2' (the same with that classifier, where "
     "block_modes() lists it), 'portable' (the same with the table classifier) or 'scalar' (the per-piece "
     "scanners alone).");

  m.def("block_modes", [] {
    std::vector<std::string> modes;
    for (const auto& [name, mode] : kBlockModes) {
      if (PieceBlocks::available(mode)) modes.emplace_back(name);
    }
    return modes;
  }, "The split_pieces modes this CPU and build run as themselves ('auto', 'portable' and 'scalar' always).");

  m.def("tiktoken_regex_refusal", [](const py::str& pat_str) {
    return tiktoken_regex_refusal(utf8_view(pat_str));
  }, py::arg("pat_str"), "Why pat_str cannot split natively (fancy-regex dialect), or '' when it can.");

  m.def("build_tiktoken_cartridge", [](const py::dict& mergeable, const py::dict& specials, const std::string& pattern, const std::string& meta_json, const py::str& pat_str) {
    TiktokenSource src;
    if (pattern == "regex") {
      src.regex = std::string(utf8_view(pat_str));  // split by the fancy-regex VM
    } else {
      src.pattern = pattern_from_name(pattern);
    }
    src.meta_json = meta_json;
    src.mergeable.reserve(mergeable.size());
    for (auto item : mergeable) {
      if (!PyBytes_Check(item.first.ptr())) throw py::type_error("mergeable_ranks keys must be bytes");
      const long long r = PyLong_AsLongLong(item.second.ptr());
      if (r == -1 && PyErr_Occurred()) throw py::error_already_set();
      if (r < 0 || r > 0xFFFFFFFFLL) throw py::value_error("rank " + std::to_string(r) + " is out of range");
      src.mergeable.emplace_back(std::string(bytes_view(item.first)), static_cast<uint32_t>(r));
    }
    for (auto item : specials) {
      if (!PyUnicode_Check(item.first.ptr())) throw py::type_error("special_tokens keys must be str");
      const long long r = PyLong_AsLongLong(item.second.ptr());
      if (r == -1 && PyErr_Occurred()) throw py::error_already_set();
      if (r < 0 || r > 0xFFFFFFFFLL) throw py::value_error("special token id " + std::to_string(r) + " is out of range");
      src.specials.emplace_back(std::string(utf8_view(item.first)), static_cast<uint32_t>(r));
    }
    std::string image;
    {
      py::gil_scoped_release release;
      try {
        image = build_tiktoken_cartridge(src);
      } catch (const std::invalid_argument& e) {
        py::gil_scoped_acquire acquire;
        throw py::value_error(e.what());
      }
    }
    return py::bytes(image);
  }, py::arg("mergeable_ranks"), py::arg("special_tokens"), py::arg("pattern"), py::arg("meta_json"), py::arg("pat_str") = "");

  // An opened cartridge: header and section table checked, nothing else read (O(1) in its size).
  // The faces open a file once, read META from it and hand it to the engine.
  py::class_<Cartridge, std::shared_ptr<Cartridge>>(m, "Cartridge")
      .def_static("open", [](const std::string& path, bool verify) {
        py::gil_scoped_release release;
        return Cartridge::open(path, verify);
      }, py::arg("path"), py::arg("verify") = false,
      "Maps a cartridge. verify=True also checks the XXH64 checksum now (else: on first use, once per file).")
      .def_static("from_bytes", [](const py::bytes& image, const std::string& label, bool verify) {
        std::string copy(bytes_view(image));
        py::gil_scoped_release release;
        return Cartridge::from_bytes(std::move(copy), label, verify);
      }, py::arg("image"), py::arg("label"), py::arg("verify") = true)
      .def_property_readonly("label", &Cartridge::label)
      .def_property_readonly("checksum", [](const Cartridge& c) { return c.header().checksum; },
                             "The checksum stored in the header (not recomputed).")
      .def_property_readonly("section_ids", [](const Cartridge& c) {
        py::list out;
        for (const SectionInfo& s : c.sections()) out.append(fourcc_name(s.id));
        return out;
      })
      .def("section", [](const Cartridge& c, const std::string& id) -> py::object {
        if (id.size() != 4) throw py::value_error("section ids are 4 characters");
        const char tmp[5] = {id[0], id[1], id[2], id[3], 0};
        const SectionInfo* s = c.find(fourcc(tmp));
        if (s == nullptr) return py::none();
        std::string copy;  // read under the guard: the file may be shrinking under the mapping
        guard_mapped_reads(c.label(), [&] { copy = std::string(c.bytes(s->id)); });
        return py::bytes(copy);
      }, py::arg("id"), "The bytes of section `id` (a copy), or None.")
      .def("verify", [](const Cartridge& c) {
        py::gil_scoped_release release;
        c.verify_checksum();
      }, "Raises ValueError unless the checksum matches (hashed once per file identity and process).")
      .def("info", [](const Cartridge& c) { return cartridge_info(c); });

  m.def("cartridge_info", [](const std::string& path, bool verify) {
    std::shared_ptr<Cartridge> c;
    {
      py::gil_scoped_release release;
      c = Cartridge::open(path, verify);
    }
    return cartridge_info(*c);
  }, py::arg("path"), py::arg("verify_checksum") = false);

  m.def("section_bytes", [](const std::string& path, const std::string& id) {
    if (id.size() != 4) throw py::value_error("section ids are 4 characters");
    auto c = Cartridge::open(path, false);
    const char tmp[5] = {id[0], id[1], id[2], id[3], 0};
    const SectionInfo* s = c->find(fourcc(tmp));
    if (s == nullptr) return py::object(py::none());
    std::string copy;  // read under the guard: the file may be shrinking under the mapping
    guard_mapped_reads(c->label(), [&] { copy = std::string(c->bytes(s->id)); });
    return py::object(py::bytes(copy));
  });

  py::class_<PyEngine>(m, "TiktokenEngine")
      .def_static("from_file", [](const std::string& path, bool verify) {
        py::gil_scoped_release release;
        std::shared_ptr<const Cartridge> c = Cartridge::open(path, verify);
        std::shared_ptr<const Engine> e;
        guard_mapped_reads(c->label(), [&] { e = std::make_shared<const Engine>(c); });
        return std::make_unique<PyEngine>(std::move(e));
      }, py::arg("path"), py::arg("verify") = false)
      .def_static("from_cartridge", [](std::shared_ptr<Cartridge> c) {
        py::gil_scoped_release release;
        std::shared_ptr<const Engine> e;
        guard_mapped_reads(c->label(), [&] { e = std::make_shared<const Engine>(std::move(c)); });
        return std::make_unique<PyEngine>(std::move(e));
      })
      .def_static("from_bytes", [](const py::bytes& image, const std::string& label) {
        std::string copy(bytes_view(image));
        py::gil_scoped_release release;
        return std::make_unique<PyEngine>(std::make_shared<const Engine>(Cartridge::from_bytes(std::move(copy), label)));
      })
      .def_property_readonly("n_ids", [](const PyEngine& pe) { return pe.unchecked().n_ids(); })
      .def_property_readonly("pattern", [](const PyEngine& pe) {
        const Engine& e = pe.unchecked();
        return e.uses_regex() ? "regex" : pattern_name(e.pattern());
      })
      .def_property_readonly("meta_json", [](const PyEngine& pe) {
        std::string v;  // read at load by the Python face: guarded like the load itself
        const Engine& e = pe.unchecked();
        guard_mapped_reads(e.cartridge().label(), [&] { v = std::string(e.meta_json()); });
        return py::str(v);
      })
      .def_property_readonly("file_size", [](const PyEngine& pe) { return pe.unchecked().cartridge().size(); })
      .def("info", [](const PyEngine& pe) { return cartridge_info(pe.unchecked().cartridge()); })
      .def("ready", [](const PyEngine& pe) { (void)*pe; }, "Runs the checks deferred from load now (ValueError on a damaged file).")
      .def("special_tokens", [](const PyEngine& pe) {
        const Engine& e = pe.unchecked();
        std::vector<std::pair<std::string, uint32_t>> specials;  // copied under the guard, as meta_json
        guard_mapped_reads(e.cartridge().label(), [&] {
          for (uint32_t i = 0; i < e.n_specials(); ++i) specials.emplace_back(std::string(e.special_text(i)), e.special_id(i));
        });
        py::list out;
        for (const auto& [text, id] : specials) out.append(py::make_tuple(py::str(text), id));
        return out;
      })
      .def("mergeable_ranks", [](const PyEngine& pe) {
        const Engine& e = *pe;
        py::dict d;
        for (uint32_t id = 0; id < e.n_ids(); ++id) {
          std::string_view b;
          if (e.kind(id) == TokenKind::kMergeable && e.token_bytes(id, &b)) d[py::bytes(b.data(), b.size())] = id;
        }
        return d;
      })
      .def("short_token_index", [](const PyEngine& pe) { return index_stats(pe->short_tokens()); },
           "The engine's index of short tokens (native/models/short_token_index.h), built on first use: "
           "{'tokens', 'left_out', 'unreached', 'bytes', 'complete'}, or None when it has none.")
      .def("short_token_index_in_use", [](const PyEngine& pe) { return pe->short_tokens_in_use(); },
           "Whether encodes use the index yet (after 16 KiB of text, or once short_token_index() built it).")
      .def("encode_ordinary", [](const PyEngine& pe, const py::str& text, bool cached) {
        const Engine& e = *pe;
        std::string_view t = utf8_view(text);
        CallIds ids;
        std::vector<uint32_t>& out = *ids;
        {
          ReleaseGilUnlessShort gil(t.size());
          try {
            e.encode_ordinary(t, out, cached);
          } catch (const BpeError& err) {
            py::gil_scoped_acquire acquire;
            raise_missing_byte(err);
          }
        }
        return pe.to_list(out);
      }, py::arg("text"), py::arg("cached") = true)
      .def("encode", [](const PyEngine& pe, const py::str& text, const py::bytes& allowed) {
        const Engine& e = *pe;
        std::string_view t = utf8_view(text);
        std::vector<uint8_t> mask = mask_from(allowed);
        CallIds ids;
        std::vector<uint32_t>& out = *ids;
        {
          ReleaseGilUnlessShort gil(t.size());
          try {
            e.encode(t, mask, out);
          } catch (const BpeError& err) {
            py::gil_scoped_acquire acquire;
            raise_missing_byte(err);
          }
        }
        return pe.to_list(out);
      })
      .def("encode_to_numpy", [](const PyEngine& pe, const py::str& text, const py::bytes& allowed) {
        const Engine& e = *pe;
        std::string_view t = utf8_view(text);
        std::vector<uint8_t> mask = mask_from(allowed);
        // The array takes this vector's memory, so it is a new one: sized for a token per three
        // bytes (English averages four or more), so that it rarely grows by doubling and copying.
        std::vector<uint32_t> out;
        out.reserve(t.size() / 3 + 16);
        {
          ReleaseGilUnlessShort gil(t.size());
          try {
            e.encode(t, mask, out);
          } catch (const BpeError& err) {
            py::gil_scoped_acquire acquire;
            raise_missing_byte(err);
          }
        }
        return to_numpy(std::move(out));
      })
      .def("find_special", [](const PyEngine& pe, const py::str& text, const py::bytes& set) -> py::object {
        const Engine& e = *pe;
        std::string_view t = utf8_view(text);
        std::vector<uint8_t> mask = mask_from(set);
        SpecialMatch m;
        {
          py::gil_scoped_release release;
          m = e.find_special(t, mask);
        }
        if (m.index < 0) return py::none();
        return py::int_(m.index);
      }, "Index of the first special token (among those flagged in the mask) occurring in text, or None.")
      .def("encode_batch", [](const PyEngine& pe, const py::list& texts, const py::bytes& allowed, const py::bytes& disallowed, size_t num_threads, bool ordinary) {
        return encode_tiktoken_batch_lists(pe, texts, allowed, disallowed, num_threads, ordinary);
      }, py::arg("texts"), py::arg("allowed"), py::arg("disallowed"), py::arg("num_threads"), py::arg("ordinary"),
      "Encodes many texts in parallel. Returns the list of id lists, or (text index, special index) "
      "for the first text holding a disallowed special token.")
      .def("encode_batch_to_numpy", [](const PyEngine& pe, const py::list& texts, const py::bytes& allowed, const py::bytes& disallowed, size_t num_threads, bool ordinary) -> py::tuple {
        // The ids written as texts finish, by the calling thread between texts of its own (as
        // HfEngine.encode_batch_flat_ids), not in a pass after the last one.
        const std::vector<std::string_view> views = utf8_views(texts);
        const size_t n = views.size();
        FlatIds flat(n, total_bytes(views), 0);
        InOrder order(n);
        auto write_ready = [&](TiktokenBatch& batch) {
          flat.size_at_first(order, [&](size_t i) { return views[i].size(); },
                             [&](size_t i) { return batch.ids[i].size(); });
          order.take([&](size_t i) {
            std::vector<uint32_t>& ids = batch.ids[i];
            std::copy(ids.begin(), ids.end(), flat.append(i, ids.size()));
            std::vector<uint32_t>().swap(ids);
          });
        };
        TiktokenBatch b = encode_tiktoken_batch(*pe, views, allowed, disallowed, num_threads, ordinary,
                                                [&](TiktokenBatch& batch, size_t i) {
          order.mark(i);
          if (order.on_caller()) write_ready(batch);
        });
        if (b.denied_text >= 0) return py::make_tuple(b.denied_text, b.denied_special);
        write_ready(b);
        auto [ids, bounds] = flat.release();
        return py::make_tuple(ids, bounds);
      }, py::arg("texts"), py::arg("allowed"), py::arg("disallowed"), py::arg("num_threads"), py::arg("ordinary"),
      "encode_batch as two arrays: (ids uint32, offsets int64 of len(texts) + 1), text i being "
      "ids[offsets[i]:offsets[i + 1]]; or (text index, special index) as encode_batch.")
      .def("count_ordinary", [](const PyEngine& pe, const py::str& text) {
        const Engine& e = *pe;
        const std::string_view t = utf8_view(text);
        size_t n = 0;
        {
          ReleaseGilUnlessShort gil(t.size());
          try {
            n = count_with([&](std::vector<uint32_t>& out) { e.encode_ordinary(t, out); });
          } catch (const BpeError& err) {
            py::gil_scoped_acquire acquire;
            raise_missing_byte(err);
          }
        }
        return n;
      }, py::arg("text"), "len(encode_ordinary(text)), without a list.")
      .def("count_ordinary_batch", [](const PyEngine& pe, const py::list& texts, size_t num_threads) {
        const Engine& e = *pe;
        const std::vector<std::string_view> views = utf8_views(texts);
        py::array_t<int64_t> counts(static_cast<py::ssize_t>(views.size()));
        int64_t* c = counts.mutable_data();
        Interrupts interrupts;
        without_gil([&] {
          parallel_for(views.size(), num_threads, [&](size_t i) {
            if (interrupts.stop()) return;
            c[i] = static_cast<int64_t>(count_with([&](std::vector<uint32_t>& out) { e.encode_ordinary(views[i], out); }));
          });
        }, &interrupts);
        return counts;
      }, py::arg("texts"), py::arg("num_threads"), "count_ordinary of every text, in parallel (int64 array).")
      .def("decode_bytes", [](const PyEngine& pe, const py::handle& ids) { return py::bytes(decode_ids(*pe, ids)); })
      .def("decode", [](const PyEngine& pe, const py::handle& ids, const std::string& errors) {
        const std::string out = decode_ids(*pe, ids);
        // Straight to str: the same result as bytes.decode("utf-8", errors), one copy fewer.
        PyObject* text = PyUnicode_DecodeUTF8(out.data(), static_cast<Py_ssize_t>(out.size()), errors.c_str());
        if (text == nullptr) throw py::error_already_set();
        return py::reinterpret_steal<py::str>(text);
      }, py::arg("ids"), py::arg("errors"))
      .def("decode_bytes_batch", [](const PyEngine& pe, const py::handle& batch, size_t num_threads) {
        const Engine& e = *pe;
        std::vector<std::vector<uint32_t>> in;
        for (py::handle h : batch) in.push_back(ids_from(h));
        std::vector<std::string> out(in.size());
        std::vector<int64_t> bad(in.size(), -1);
        {
          py::gil_scoped_release release;
          parallel_for(in.size(), num_threads, [&](size_t i) {
            uint32_t b = 0;
            if (!e.decode(in[i].data(), in[i].size(), out[i], &b)) bad[i] = b;
          });
        }
        for (int64_t b : bad) {
          if (b >= 0) raise_bad_token(static_cast<uint32_t>(b));
        }
        py::list result(out.size());
        for (size_t i = 0; i < out.size(); ++i) result[i] = py::bytes(out[i]);
        return result;
      })
      .def("token_bytes", [](const PyEngine& pe, const py::handle& id) {
        const Engine& e = *pe;
        const uint32_t v = id_from(id);
        std::string_view b;
        if (!e.token_bytes(v, &b)) throw py::key_error(std::to_string(v));
        return py::bytes(b.data(), b.size());
      })
      .def("tokens_bytes", [](const PyEngine& pe, const py::handle& ids) {
        const Engine& e = *pe;
        std::vector<uint32_t> v = ids_from(ids);
        py::list out(v.size());
        for (size_t i = 0; i < v.size(); ++i) {
          std::string_view b;
          if (!e.token_bytes(v[i], &b)) throw py::key_error(std::to_string(v[i]));
          out[i] = py::bytes(b.data(), b.size());
        }
        return out;
      })
      .def("is_special", [](const PyEngine& pe, uint32_t id) { return pe->kind(id) == TokenKind::kSpecial; })
      .def("encode_single_token", [](const PyEngine& pe, const py::bytes& b) {
        const Engine& e = *pe;
        return e.encode_single_token(bytes_view(b));  // -1 when not a token
      })
      .def("encode_single_piece", [](const PyEngine& pe, const py::bytes& b) {
        const Engine& e = *pe;
        std::string_view v = bytes_view(b);
        std::vector<uint32_t> out;
        if (!v.empty()) without_gil([&] { e.byte_pair_encode(reinterpret_cast<const uint8_t*>(v.data()), v.size(), out); });
        return pe.to_list(out);
      })
      .def("token_byte_values", [](const PyEngine& pe) {
        const Engine& e = *pe;
        std::vector<std::string_view> v;
        {
          py::gil_scoped_release release;
          v = e.sorted_mergeable();
        }
        py::list out(v.size());
        for (size_t i = 0; i < v.size(); ++i) out[i] = py::bytes(v[i].data(), v[i].size());
        return out;
      })
      .def("encode_with_unstable", [](const PyEngine& pe, const py::str& text, const py::bytes& allowed) {
        const Engine& e = *pe;
        std::string_view t = utf8_view(text);
        std::vector<uint8_t> mask = mask_from(allowed);
        std::pair<std::vector<uint32_t>, std::vector<std::vector<uint32_t>>> r;
        {
          py::gil_scoped_release release;
          r = e.encode_with_unstable(t, mask);
        }
        py::list completions(r.second.size());
        for (size_t i = 0; i < r.second.size(); ++i) completions[i] = pe.to_list(r.second[i]);
        return py::make_tuple(pe.to_list(r.first), completions);
      });
  bind_piece_batches(m);
}
