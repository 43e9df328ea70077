# x86 kernel levels. Each level's sources live in components/kernels/<level>/ and are compiled with exactly the
# instruction-set flags of that level, so one binary can hold several levels and pick at run time (toolkit tests),
# while a generated engine copies and compiles only the level its constraints chose.
# The CKB platform entries (ckb/platforms/*.toml) name the same levels and flags; keep them in sync.
set(MI_KERNEL_LEVELS scalar avx2 avx512 avx512bf16 amx)
set(MI_KERNEL_FLAGS_scalar "")
set(MI_KERNEL_FLAGS_avx2 "-mavx2;-mfma;-mf16c")
set(MI_KERNEL_FLAGS_avx512 "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq")
set(MI_KERNEL_FLAGS_avx512bf16 "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512bf16")
set(MI_KERNEL_FLAGS_amx "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512bf16;-mamx-tile;-mamx-bf16")

function(mi_add_kernel_levels target kernels_dir)
  file(GLOB common_sources CONFIGURE_DEPENDS ${kernels_dir}/*.cpp)
  target_sources(${target} PRIVATE ${common_sources})
  set_source_files_properties(${common_sources} PROPERTIES COMPILE_OPTIONS "$<$<NOT:$<CONFIG:Debug>>:-O3>")
  foreach(level ${MI_KERNEL_LEVELS})
    file(GLOB level_sources CONFIGURE_DEPENDS ${kernels_dir}/${level}/*.cpp)
    if(level_sources)
      target_sources(${target} PRIVATE ${level_sources})
      # -O3 in every build type but Debug, as for every kernel source of a generated engine
      # (toolkit/generator/generator.cpp): at -O2 GCC 12 keeps the decode kernels' accumulators in memory.
      set_source_files_properties(${level_sources} PROPERTIES COMPILE_OPTIONS "${MI_KERNEL_FLAGS_${level}};$<$<NOT:$<CONFIG:Debug>>:-O3>")
    endif()
  endforeach()
endfunction()
