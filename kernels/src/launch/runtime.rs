//! The CUDA runtime of tessera: a device context and stream, NVRTC compilation to CUBIN for
//! the device's exact target, and a module cache.
//!
//! cudarc loads `libcuda`, `libnvrtc`, `libcublas` and `libcublasLt` at run time (feature
//! `dynamic-loading`), so a binary built without CUDA runs on a GPU host as is. NVRTC is
//! looked up by cudarc's candidate names, which include `libnvrtc.so.13` (the name in CUDA 13
//! toolkits and in the `nvidia-cuda-nvrtc` 13.0 wheel): put its directory on `LD_LIBRARY_PATH`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream};
use cudarc::nvrtc::{result as nvrtc_result, sys as nvrtc_sys, Ptx};

use crate::arch::Arch;
use crate::error::{CompileFailure, KernelError, Result};

/// The CUDA include directory: `TESSERA_CUDA_INCLUDE`, else `$CUDA_HOME/include`, else
/// `$CUDA_PATH/include`, else `/usr/local/cuda/include`; the first that exists.
///
/// tessera's kernels include no CUDA header (16-bit floats are handled with PTX), but the
/// directory is passed to NVRTC when found so that a template may include one.
pub fn cuda_include_dir() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("TESSERA_CUDA_INCLUDE") {
        candidates.push(PathBuf::from(p));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(p) = std::env::var_os(var) {
            candidates.push(PathBuf::from(p).join("include"));
        }
    }
    candidates.push(PathBuf::from("/usr/local/cuda/include"));
    candidates.into_iter().find(|p| p.is_dir())
}

/// The NVRTC version `(major, minor)`, or why NVRTC cannot be loaded.
pub fn nvrtc_version() -> Result<(i32, i32)> {
    // cudarc panics when asked for a symbol of a library it cannot load; ask first.
    let present = unsafe { nvrtc_sys::is_culib_present() };
    if !present {
        return Err(KernelError::NvrtcUnavailable {
            op: "nvrtc_version",
            msg: format!(
                "libnvrtc not found (searched {:?}); add its directory to LD_LIBRARY_PATH",
                cudarc::get_lib_name_candidates("nvrtc")
            ),
        });
    }
    let (mut major, mut minor) = (0, 0);
    unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| KernelError::NvrtcUnavailable {
            op: "nvrtcVersion",
            msg: format!("{e:?}"),
        })?;
    Ok((major, minor))
}

/// A compiled kernel image.
#[derive(Clone, Debug)]
#[cfg_attr(not(feature = "bench"), allow(dead_code))]
pub struct Compiled {
    /// The CUBIN for the target.
    pub cubin: Vec<u8>,
    /// NVRTC's log (warnings, and ptxas statistics when asked for).
    pub log: String,
    /// The options used.
    pub options: Vec<String>,
}

/// The NVRTC options tessera compiles with for `arch`.
pub fn nvrtc_options(arch: Arch, ptxas_verbose: bool) -> Vec<String> {
    let mut o = vec![
        format!("--gpu-architecture={}", arch.nvrtc_name()),
        "-std=c++17".to_string(),
    ];
    if let Some(inc) = cuda_include_dir() {
        o.push(format!("--include-path={}", inc.display()));
    }
    if ptxas_verbose {
        o.push("--ptxas-options=-v".to_string());
    }
    o
}

fn failure(
    op: &'static str,
    kernel: &str,
    status: String,
    options: &[String],
    log: &str,
    source: &str,
) -> KernelError {
    KernelError::Compile(Box::new(CompileFailure {
        op,
        kernel: kernel.to_string(),
        status,
        options: options.to_vec(),
        log: log.to_string(),
        source_text: source.to_string(),
    }))
}

/// Compiles `source` with NVRTC to a CUBIN for `arch`. Needs no GPU.
///
/// On failure the error holds NVRTC's log, the options and the numbered source.
pub fn compile(source: &str, kernel: &str, arch: Arch, ptxas_verbose: bool) -> Result<Compiled> {
    nvrtc_version()?;
    let options = nvrtc_options(arch, ptxas_verbose);
    let op = "nvrtc compile";
    let c_src = std::ffi::CString::new(source)
        .map_err(|_| KernelError::invalid(op, "source contains a NUL byte"))?;
    let c_name = std::ffi::CString::new(format!("{kernel}.cu"))
        .map_err(|_| KernelError::invalid(op, "kernel name contains a NUL byte"))?;
    let prog = nvrtc_result::create_program(&c_src, Some(&c_name)).map_err(|e| {
        failure(
            "nvrtcCreateProgram",
            kernel,
            format!("{e:?}"),
            &options,
            "",
            source,
        )
    })?;
    let compiled = unsafe { nvrtc_result::compile_program(prog, &options) };
    let log = unsafe { nvrtc_result::get_program_log(prog) }
        .map(|raw| {
            let bytes: Vec<u8> = raw
                .iter()
                .take_while(|&&c| c != 0)
                .map(|&c| c as u8)
                .collect();
            String::from_utf8_lossy(&bytes).into_owned()
        })
        .unwrap_or_default();
    let out = match compiled {
        Err(e) => Err(failure(
            "nvrtcCompileProgram",
            kernel,
            format!("{e:?}"),
            &options,
            &log.clone(),
            source,
        )),
        Ok(()) => {
            let mut size = 0usize;
            let r = unsafe { nvrtc_sys::nvrtcGetCUBINSize(prog, &mut size) }
                .result()
                .and_then(|_| {
                    let mut cubin = vec![0u8; size];
                    unsafe { nvrtc_sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr().cast()) }
                        .result()
                        .map(|_| cubin)
                });
            r.map_err(|e| {
                failure(
                    "nvrtcGetCUBIN",
                    kernel,
                    format!("{e:?}"),
                    &options,
                    &log.clone(),
                    source,
                )
            })
            .map(|cubin| Compiled {
                cubin,
                log: log.clone(),
                options: options.clone(),
            })
        }
    };
    let _ = unsafe { nvrtc_result::destroy_program(prog) };
    out
}

/// FNV-1a, 64 bits, from offset basis `h`: a stable hash for the module cache key.
fn fnv1a_from(mut h: u64, parts: &[&[u8]]) -> u64 {
    for p in parts {
        for &b in *p {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn fnv1a(parts: &[&[u8]]) -> u64 {
    fnv1a_from(0xcbf2_9ce4_8422_2325, parts)
}

/// The module cache key: a hash of the source, the options (which name the target) and the
/// NVRTC version.
pub fn cache_key(source: &str, options: &[String], nvrtc: (i32, i32)) -> u64 {
    let opts = options.join("\u{1f}");
    let ver = format!("{}.{}", nvrtc.0, nvrtc.1);
    fnv1a(&[source.as_bytes(), opts.as_bytes(), ver.as_bytes()])
}

/// A second, independent hash of the same key material, stored inside a disk-cache entry: an
/// entry is used only when both hashes match, so two sources whose first hashes collide do
/// not share a CUBIN.
fn check_hash(source: &str, options: &[String], nvrtc: (i32, i32)) -> u64 {
    let opts = options.join("\u{1f}");
    let ver = format!("{}.{}", nvrtc.0, nvrtc.1);
    fnv1a_from(
        0x6c62_272e_07bb_0142,
        &[ver.as_bytes(), opts.as_bytes(), source.as_bytes()],
    )
}

/// The magic bytes that open a disk-cache entry (then the check hash, then the CUBIN).
const DISK_MAGIC: &[u8; 8] = b"TSRCUBN1";

fn disk_path(dir: &Path, key: u64) -> PathBuf {
    dir.join(format!("{key:016x}.cubin"))
}

/// The CUBIN of a disk-cache entry whose check hash is `check`, or `None` (missing, foreign
/// or truncated entries are ignored and recompiled).
fn disk_read(dir: &Path, key: u64, check: u64) -> Option<Vec<u8>> {
    let bytes = std::fs::read(disk_path(dir, key)).ok()?;
    if bytes.len() <= 16 || &bytes[..8] != DISK_MAGIC {
        return None;
    }
    let stored = u64::from_le_bytes(bytes[8..16].try_into().ok()?);
    (stored == check).then(|| bytes[16..].to_vec())
}

/// Writes an entry atomically (a temporary file renamed into place), so a concurrent reader
/// sees the whole entry or none. Failures are ignored: the cache is an optimization.
fn disk_write(dir: &Path, key: u64, check: u64, cubin: &[u8]) {
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp = dir.join(format!(
        "{key:016x}.{}.{:?}.tmp",
        std::process::id(),
        std::thread::current().id()
    ));
    let mut bytes = Vec::with_capacity(16 + cubin.len());
    bytes.extend_from_slice(DISK_MAGIC);
    bytes.extend_from_slice(&check.to_le_bytes());
    bytes.extend_from_slice(cubin);
    if std::fs::write(&tmp, &bytes).is_ok() && std::fs::rename(&tmp, disk_path(dir, key)).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// What the module cache did so far: NVRTC compiles and their time, disk-cache hits.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CompileStats {
    /// Modules compiled with NVRTC.
    pub compiled: u32,
    /// Seconds spent in NVRTC.
    pub compile_seconds: f64,
    /// Modules loaded from the disk cache.
    pub disk_hits: u32,
    /// Modules found in the in-memory cache.
    pub memory_hits: u32,
}

pub(crate) fn driver_err(
    op: &'static str,
) -> impl FnOnce(cudarc::driver::DriverError) -> KernelError {
    move |e| KernelError::Driver {
        op,
        msg: format!("{e:?}"),
    }
}

/// A CUDA device, a stream of its own, its target and the compiled-module cache (in memory,
/// and on disk when a cache folder is set).
pub struct Runtime {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    arch: Arch,
    name: String,
    sms: i32,
    smem_optin: i64,
    nvrtc: (i32, i32),
    cache: Mutex<HashMap<u64, Arc<CudaModule>>>,
    disk: Mutex<Option<PathBuf>>,
    stats: Mutex<CompileStats>,
}

impl Runtime {
    /// Opens device `ordinal`. Errors with [`KernelError::NoDevice`] when the driver library
    /// is missing or there is no such device, and [`KernelError::UnsupportedArch`] below 8.0.
    pub fn new(ordinal: usize) -> Result<Runtime> {
        let ctx = Runtime::device_context(ordinal)?;
        // The harness's own context: one stream, no cross-stream event tracking needed, and
        // none in timed loops.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(driver_err("cuStreamCreate"))?;
        Runtime::on(ctx, stream)
    }

    /// The primary context of device `ordinal`, or why there is none.
    pub(crate) fn device_context(ordinal: usize) -> Result<Arc<CudaContext>> {
        let op = "Context::new";
        let present = unsafe { cudarc::driver::sys::is_culib_present() };
        if !present {
            return Err(KernelError::NoDevice {
                op,
                msg: "libcuda (the driver) cannot be loaded".into(),
            });
        }
        let count = CudaContext::device_count().map_err(|e| KernelError::NoDevice {
            op,
            msg: format!("cuDeviceGetCount: {e:?}"),
        })?;
        if (ordinal as i32) >= count {
            return Err(KernelError::NoDevice {
                op,
                msg: format!("device {ordinal} asked for, {count} present"),
            });
        }
        CudaContext::new(ordinal).map_err(driver_err("cuCtx (primary context)"))
    }

    /// A runtime on the caller's context, whose settings are left as they are: no stream is
    /// created on it (a second stream would put cudarc's event tracking to work on every
    /// slice of the context); its own work (a workspace's allocation) goes to the default
    /// stream. The disk cache folder is `TESSERA_CACHE_DIR` when set.
    pub fn from_context(ctx: Arc<CudaContext>) -> Result<Runtime> {
        let stream = ctx.default_stream();
        Runtime::on(ctx, stream)
    }

    fn on(ctx: Arc<CudaContext>, stream: Arc<CudaStream>) -> Result<Runtime> {
        let (major, minor) = ctx
            .compute_capability()
            .map_err(driver_err("compute capability"))?;
        let arch = Arch::from_compute_capability(major, minor)?;
        let name = ctx.name().map_err(driver_err("cuDeviceGetName"))?;
        let sms = ctx
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )
            .map_err(driver_err("cuDeviceGetAttribute"))?;
        let smem_optin = ctx
            .attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .map_err(driver_err("cuDeviceGetAttribute"))? as i64;
        let nvrtc = nvrtc_version()?;
        let disk = std::env::var_os("TESSERA_CACHE_DIR")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from);
        Ok(Runtime {
            ctx,
            stream,
            arch,
            name,
            sms,
            smem_optin,
            nvrtc,
            cache: Mutex::new(HashMap::new()),
            disk: Mutex::new(disk),
            stats: Mutex::new(CompileStats::default()),
        })
    }

    /// Sets (or with `None` clears) the folder of the disk cache.
    pub fn set_cache_dir(&self, dir: Option<PathBuf>) {
        if let Ok(mut d) = self.disk.lock() {
            *d = dir;
        }
    }

    /// The folder of the disk cache, if any.
    pub fn cache_dir(&self) -> Option<PathBuf> {
        self.disk.lock().ok().and_then(|d| d.clone())
    }

    /// What the module cache has done so far.
    pub fn compile_stats(&self) -> CompileStats {
        self.stats.lock().map(|s| *s).unwrap_or_default()
    }

    /// The device's target.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// The device's name.
    pub fn device_name(&self) -> &str {
        &self.name
    }

    /// Streaming multiprocessors.
    pub fn sm_count(&self) -> i32 {
        self.sms
    }

    /// The NVRTC version.
    pub fn nvrtc(&self) -> (i32, i32) {
        self.nvrtc
    }

    /// The stream every tessera launch goes to.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// A launch on this runtime's own stream, with the kernels' own workspaces.
    pub fn cx(&self) -> crate::launch::mem::LaunchCtx<'_> {
        crate::launch::mem::LaunchCtx {
            rt: self,
            stream: &self.stream,
            work: None,
        }
    }

    /// The context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Compiles (or finds in the cache) `source` for this device and returns its entry point
    /// `entry`, with its dynamic shared-memory limit raised to `smem_bytes` (needed above
    /// 48 KB). `name` names the program in NVRTC's messages (a plan's kernel name).
    pub fn function(
        &self,
        source: &str,
        name: &str,
        entry: &str,
        smem_bytes: i64,
    ) -> Result<CudaFunction> {
        let options = nvrtc_options(self.arch, false);
        let key = cache_key(source, &options, self.nvrtc);
        let lock = || {
            self.cache.lock().map_err(|_| {
                KernelError::invalid("Runtime::function", "module cache lock poisoned")
            })
        };
        let cached = lock()?.get(&key).cloned();
        let module = match cached {
            Some(m) => {
                self.note(|s| s.memory_hits += 1);
                m
            }
            None => {
                // Compiled without the lock, so that threads building different kernels
                // compile in parallel; two threads building the same one both compile it,
                // and the first module loaded is kept.
                let cubin = self.cubin(source, name, &options, key)?;
                self.ctx
                    .bind_to_thread()
                    .map_err(driver_err("cuCtxSetCurrent"))?;
                let m = self
                    .ctx
                    .load_module(Ptx::from_binary(cubin))
                    .map_err(driver_err("cuModuleLoadData"))?;
                lock()?.entry(key).or_insert(m).clone()
            }
        };
        let f = module
            .load_function(entry)
            .map_err(driver_err("cuModuleGetFunction"))?;
        let max = self.smem_optin;
        if smem_bytes > max {
            return Err(KernelError::UnsupportedArch {
                op: "Runtime::function",
                arch: self.arch.to_string(),
                msg: format!(
                    "{name} needs {smem_bytes} B of shared memory, the device allows {max}"
                ),
            });
        }
        self.ctx
            .bind_to_thread()
            .map_err(driver_err("cuCtxSetCurrent"))?;
        f.set_attribute(
            cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            smem_bytes as i32,
        )
        .map_err(driver_err("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)"))?;
        Ok(f)
    }

    /// The CUBIN of `source`: from the disk cache when it has the entry, else compiled with
    /// NVRTC (and written to the disk cache).
    fn cubin(&self, source: &str, name: &str, options: &[String], key: u64) -> Result<Vec<u8>> {
        let dir = self.cache_dir();
        let check = check_hash(source, options, self.nvrtc);
        if let Some(bytes) = dir.as_deref().and_then(|d| disk_read(d, key, check)) {
            self.note(|s| s.disk_hits += 1);
            return Ok(bytes);
        }
        let t0 = Instant::now();
        let compiled = compile(source, name, self.arch, false)?;
        let secs = t0.elapsed().as_secs_f64();
        self.note(|s| {
            s.compiled += 1;
            s.compile_seconds += secs;
        });
        if let Some(d) = dir.as_deref() {
            disk_write(d, key, check, &compiled.cubin);
        }
        Ok(compiled.cubin)
    }

    fn note(&self, f: impl FnOnce(&mut CompileStats)) {
        if let Ok(mut s) = self.stats.lock() {
            f(&mut s);
        }
    }

    /// The module compiled from `source` (with this runtime's options), if
    /// [`Runtime::function`] compiled it.
    fn cached_module(&self, op: &'static str, source: &str) -> Result<Arc<CudaModule>> {
        let key = cache_key(source, &nvrtc_options(self.arch, false), self.nvrtc);
        let cache = self
            .cache
            .lock()
            .map_err(|_| KernelError::invalid(op, "module cache lock poisoned"))?;
        cache.get(&key).cloned().ok_or_else(|| {
            KernelError::invalid(
                op,
                "no module compiled from this source (call function first)",
            )
        })
    }

    /// Sets the bytes of the device variable `symbol` (a `__device__` global) of the module
    /// compiled from `source` to zero. For instrumented kernels (e.g. the Hopper kernel's
    /// timeline, `TESSERA_SM90_TIMELINE`).
    pub fn zero_global(&self, source: &str, symbol: &str) -> Result<()> {
        let op = "Runtime::zero_global";
        let m = self.cached_module(op, source)?;
        let mut g = m
            .get_global(symbol, &self.stream)
            .map_err(driver_err("cuModuleGetGlobal"))?;
        self.stream
            .memset_zeros(&mut g)
            .map_err(driver_err("cuMemsetD8Async"))?;
        self.stream.synchronize().map_err(driver_err(op))
    }

    /// The bytes of the device variable `symbol` of the module compiled from `source`, read
    /// after the stream's work so far.
    pub fn read_global(&self, source: &str, symbol: &str) -> Result<Vec<u8>> {
        let m = self.cached_module("Runtime::read_global", source)?;
        let g = m
            .get_global(symbol, &self.stream)
            .map_err(driver_err("cuModuleGetGlobal"))?;
        self.stream
            .clone_dtoh(&g)
            .map_err(driver_err("cuMemcpyDtoH (global)"))
    }

    /// Modules compiled so far.
    pub fn cached_modules(&self) -> usize {
        self.cache.lock().map(|c| c.len()).unwrap_or(0)
    }
}
