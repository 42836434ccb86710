#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tessera_fuzz::targets::unary(data));
