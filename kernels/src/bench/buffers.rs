//! Device buffers of the harnesses: uploads from host values, NaN-poisoned outputs, downloads
//! to float64 (the float64 checks of `tessera run` and the benchmarks).

use cudarc::driver::{CudaSlice, DevicePtr};

use crate::error::Result;
use crate::launch::mem::Mem;
use crate::launch::runtime::{driver_err, Runtime};
use crate::plan::problem::DType;

/// A device buffer of `len` elements of `dtype`.
pub struct DeviceBuf {
    /// Element type.
    pub dtype: DType,
    /// Elements.
    pub len: usize,
    /// The bytes.
    pub data: CudaSlice<u8>,
}

impl DeviceBuf {
    /// Uploads `values`, rounded to `dtype`.
    pub fn upload(rt: &Runtime, dtype: DType, values: &[f32]) -> Result<DeviceBuf> {
        let bytes = to_bytes(dtype, values);
        let data = rt
            .stream()
            .clone_htod(&bytes)
            .map_err(driver_err("cuMemcpyHtoD"))?;
        Ok(DeviceBuf {
            dtype,
            len: values.len(),
            data,
        })
    }

    /// A buffer of `len` elements, every byte 0xFF: NaN in bf16, fp16 and fp32 alike, so an
    /// element the kernel does not write stays NaN.
    pub fn poisoned(rt: &Runtime, dtype: DType, len: usize) -> Result<DeviceBuf> {
        let bytes = vec![0xFFu8; len * dtype.bytes() as usize];
        let data = rt
            .stream()
            .clone_htod(&bytes)
            .map_err(driver_err("cuMemcpyHtoD"))?;
        Ok(DeviceBuf { dtype, len, data })
    }

    /// Fills the buffer with 0xFF bytes again.
    pub fn poison(&mut self, rt: &Runtime) -> Result<()> {
        let bytes = vec![0xFFu8; self.len * self.dtype.bytes() as usize];
        rt.stream()
            .memcpy_htod(&bytes, &mut self.data)
            .map_err(driver_err("cuMemcpyHtoD"))
    }

    /// Sets elements `start .. start + len` to 0xFF bytes (NaN).
    pub fn poison_range(&mut self, rt: &Runtime, start: usize, len: usize) -> Result<()> {
        let eb = self.dtype.bytes() as usize;
        let bytes = vec![0xFFu8; len * eb];
        let mut view = self.data.slice_mut(start * eb..(start + len) * eb);
        rt.stream()
            .memcpy_htod(&bytes, &mut view)
            .map_err(driver_err("cuMemcpyHtoD"))
    }

    /// Downloads elements `start .. start + len` as float64.
    pub fn download_range(&self, rt: &Runtime, start: usize, len: usize) -> Result<Vec<f64>> {
        let eb = self.dtype.bytes() as usize;
        let view = self.data.slice(start * eb..(start + len) * eb);
        let bytes = rt
            .stream()
            .clone_dtoh(&view)
            .map_err(driver_err("cuMemcpyDtoH"))?;
        Ok(from_bytes(self.dtype, &bytes))
    }

    /// Downloads the values as float64.
    pub fn download(&self, rt: &Runtime) -> Result<Vec<f64>> {
        let bytes = rt
            .stream()
            .clone_dtoh(&self.data)
            .map_err(driver_err("cuMemcpyDtoH"))?;
        Ok(from_bytes(self.dtype, &bytes))
    }

    /// Downloads the bytes as little-endian 32-bit words, unconverted (a bit mask): going
    /// through [`DeviceBuf::download`]'s float64 would quiet the signalling-NaN patterns
    /// among the words and flip their bit 22.
    pub fn download_words(&self, rt: &Runtime) -> Result<Vec<u32>> {
        let bytes = rt
            .stream()
            .clone_dtoh(&self.data)
            .map_err(driver_err("cuMemcpyDtoH"))?;
        Ok(bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }

    /// The raw device address.
    pub fn ptr(&self, rt: &Runtime) -> u64 {
        let (p, _sync) = self.data.device_ptr(rt.stream());
        p
    }

    /// The span a launcher checks and addresses (the harness's runtime disables cudarc's event
    /// tracking, so the address needs no guard).
    pub fn mem(&self, rt: &Runtime) -> Mem {
        Mem {
            ptr: self.ptr(rt),
            len: self.len,
            dtype: self.dtype,
        }
    }
}

fn to_bytes(dtype: DType, values: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * dtype.bytes() as usize);
    for &v in values {
        match dtype {
            DType::Bf16 => out.extend_from_slice(&half::bf16::from_f32(v).to_bits().to_le_bytes()),
            DType::F16 => out.extend_from_slice(&half::f16::from_f32(v).to_bits().to_le_bytes()),
            DType::F32 => out.extend_from_slice(&v.to_le_bytes()),
        }
    }
    out
}

fn from_bytes(dtype: DType, bytes: &[u8]) -> Vec<f64> {
    match dtype {
        DType::Bf16 => bytes
            .chunks_exact(2)
            .map(|c| half::bf16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f64())
            .collect(),
        DType::F16 => bytes
            .chunks_exact(2)
            .map(|c| half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f64())
            .collect(),
        DType::F32 => bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
            .collect(),
    }
}
