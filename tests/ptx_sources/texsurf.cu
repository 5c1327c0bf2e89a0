// Texture objects (1D/2D/3D, layered, cubemap, LOD, gather) and surface objects.
__global__ void textures(cudaTextureObject_t t1, cudaTextureObject_t t2, cudaTextureObject_t t3,
                         cudaTextureObject_t layered, cudaTextureObject_t cube, float4 *out, int *iout) {
    int i = threadIdx.x;
    float x = i * 0.5f, y = i * 0.25f;
    float a = tex1Dfetch<float>(t1, i);
    float4 b = tex2D<float4>(t2, x, y);
    float c = tex3D<float>(t3, x, y, 0.5f);
    float d = tex2DLayered<float>(layered, x, y, 2);
    float e = texCubemap<float>(cube, x, y, 1.0f);
    float g = tex2DLod<float>(t2, x, y, 1.5f);
    float4 h = tex2Dgather<float4>(t2, x, y, 1);
    float k = tex2DGrad<float>(t2, x, y, make_float2(1, 0), make_float2(0, 1));
    int m = tex1D<int>(t1, x);
    out[i] = make_float4(a + b.x, c + d, e + g + k, h.w);
    iout[i] = m;
}

__global__ void surfaces(cudaSurfaceObject_t s1, cudaSurfaceObject_t s2, cudaSurfaceObject_t s3, int *out) {
    int i = threadIdx.x;
    float v;
    surf2Dread(&v, s2, i * 4, i);
    surf2Dwrite(v * 2.0f, s2, i * 4, i + 1);
    int w = surf1Dread<int>(s1, i * 4, cudaBoundaryModeClamp);
    surf1Dwrite(w + 1, s1, i * 4, cudaBoundaryModeZero);
    uchar4 c;
    surf3Dread(&c, s3, i * 4, 0, 1);
    surf3Dwrite(c, s3, i * 4, 1, 1);
    out[i] = w + c.x;
}
