module ferryman.local/pause

go 1.22
