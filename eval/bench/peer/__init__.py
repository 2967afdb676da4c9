"""llama.cpp's server and livetrans side by side (``livetrans bench peer``): the samples, the
pinned prompt, the servers, the closed- and open-loop runs and their figures."""
