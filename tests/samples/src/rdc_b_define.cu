// nv_rdc_two_links, second device link: defines rdc_lookup, a name the first link (rdc_define.cu) defines too;
// each device link resolves it within itself.
__device__ int b_scale = 5;
__device__ float rdc_lookup(int i) { return (float)(i * 7); }
