// The XLA device's hooks PyTorch has no Python way to register.
//
// The device guard PyTorch asks for when a device has no index ('xla', torch.device('xla'))
// or when it switches the current device. XLA devices have no streams; the current index is
// per thread, as CUDA's is.
//
// A fallback for the sparse XLA dispatch keys: a factory asked for a sparse layout on an XLA
// device (torch.zeros(..., layout=torch.sparse_coo, device='xla')) lands there, and is told
// that XLA devices have no sparse tensors.
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include <cstdlib>

namespace {
thread_local c10::DeviceIndex current_index = 0;

struct XLAGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return c10::DeviceType::XLA; }
  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old = getDevice();
    if (d.has_index()) current_index = d.index();
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(c10::DeviceType::XLA, current_index); }
  void setDevice(c10::Device d) const override { if (d.has_index()) current_index = d.index(); }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.has_index()) current_index = d.index();
  }
  c10::Stream getStream(c10::Device d) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, s.device());
  }
  // Set by the runtime once it knows its devices (the autograd engine sizes its per-device
  // queues with this).
  c10::DeviceIndex deviceCount() const noexcept override {
    const char* n = std::getenv("TORCH_XLA_DEVICE_COUNT");
    return n && std::atoi(n) > 0 ? static_cast<c10::DeviceIndex>(std::atoi(n)) : 1;
  }
};

C10_REGISTER_GUARD_IMPL(XLA, XLAGuardImpl);

void sparse_unsupported(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                        torch::jit::Stack*) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "sparse tensors are not supported on XLA devices (",
                              op.schema().name(), " was asked for one; XLA tensors are dense, ",
                              "torch.strided)");
}
}  // namespace

TORCH_LIBRARY_IMPL(_, SparseXLA, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_unsupported>());
}
TORCH_LIBRARY_IMPL(_, SparseCsrXLA, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_unsupported>());
}
