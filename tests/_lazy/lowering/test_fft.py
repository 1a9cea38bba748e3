import pytest
import torch

from tests.conftest import check_lowered

F = torch.fft


def _rand(*shape, seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    return torch.randn(*shape, dtype=dtype)


R, R_ODD = _rand(4, 6), _rand(3, 5, seed=1)
C, C3 = _rand(4, 6, seed=2, dtype=torch.complex64), _rand(2, 3, 5, seed=3, dtype=torch.complex64)

# name -> (fn(x, norm), input); complex inputs to the c2r transforms are not Hermitian, so
# the imaginary parts of their zero (and Nyquist) bins must be ignored as on the CPU
CASES = {
    "fft": (lambda x, norm: F.fft(x, norm=norm), C),
    "fft_real_padded": (lambda x, norm: F.fft(x, n=9, dim=0, norm=norm), R),
    "ifft": (lambda x, norm: F.ifft(x, n=4, norm=norm), C),
    "rfft": (lambda x, norm: F.rfft(x, norm=norm), R_ODD),
    "irfft": (lambda x, norm: F.irfft(x, norm=norm), C),
    "irfft_odd": (lambda x, norm: F.irfft(x, n=7, norm=norm), C),
    "hfft": (lambda x, norm: F.hfft(x, norm=norm), C),
    "ihfft": (lambda x, norm: F.ihfft(x, dim=0, norm=norm), R),
    "fft2": (lambda x, norm: F.fft2(x, norm=norm), C3),
    "ifft2": (lambda x, norm: F.ifft2(x, norm=norm), R),
    "fftn": (lambda x, norm: F.fftn(x, s=(3, 4), norm=norm), C3),
    "ifftn": (lambda x, norm: F.ifftn(x, dim=(0, 2), norm=norm), C3),
    "rfft2": (lambda x, norm: F.rfft2(x, norm=norm), R),
    "rfftn": (lambda x, norm: F.rfftn(x, norm=norm), R_ODD),
    "irfft2": (lambda x, norm: F.irfft2(x, norm=norm), C),
    "irfftn": (lambda x, norm: F.irfftn(x, s=(5, 7), norm=norm), C3),
    "hfft2": (lambda x, norm: F.hfft2(x, norm=norm), C3),
    "hfftn": (lambda x, norm: F.hfftn(x, s=(4, 4), norm=norm), C),
    "ihfft2": (lambda x, norm: F.ihfft2(x, norm=norm), R),
    "ihfftn": (lambda x, norm: F.ihfftn(x, dim=(0, 1), norm=norm), R_ODD),
}
NORMS = [None, "forward", "ortho"]


@pytest.mark.parametrize("name", CASES)
def test_forward(name):
    fn, x = CASES[name]
    check_lowered(lambda x: tuple(fn(x, norm) for norm in NORMS), x, rtol=1e-5)


# Left out: ihfft and ihfftn, whose backward (PyTorch's fft_r2c_backward) keeps a reference to
# the conjugated gradient's sizes across an op after which functionalization replaces that
# tensor's value; the freed sizes give a wrong slice end when memory is reused (typically
# on a repeated call: "The size of tensor a (7) must match the size of tensor b (4)").
@pytest.mark.parametrize("name", [n for n in CASES if n not in ("ihfft", "ihfftn")])
def test_backward(name):
    fn, x = CASES[name]
    norm = NORMS[sorted(CASES).index(name) % 3]
    check_lowered(lambda x: fn(x, norm), x.detach().requires_grad_(), grads=True, rtol=1e-4, atol=1e-4)


def test_float64_and_int_inputs():
    x64 = _rand(3, 8, dtype=torch.float64)
    check_lowered(lambda x: (F.rfft(x), F.fft(x.to(torch.complex128), norm="ortho"),
                             F.irfft(F.rfft(x), n=8)), x64, rtol=1e-10, atol=1e-10)
    check_lowered(lambda x: (F.fft(x), F.rfft(x, norm="forward")), torch.arange(10))


def test_shift_and_empty_dims():
    check_lowered(lambda x: (F.fftshift(x), F.ifftshift(x, dim=0), F.fftn(x, dim=())), C3)


def test_stft_istft():
    signal = _rand(64, seed=4)
    window = torch.hann_window(16)

    def roundtrip(x, w):
        spec = torch.stft(x, 16, hop_length=4, window=w, return_complex=True)
        return spec, torch.istft(spec, 16, hop_length=4, window=w, length=64)
    check_lowered(roundtrip, signal, window, rtol=1e-5)
