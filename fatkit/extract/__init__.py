"""Find the GPU code in files, directories, archives and wheels, and judge what it means for AMD."""
