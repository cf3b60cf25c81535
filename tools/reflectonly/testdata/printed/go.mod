module example.com/printed

go 1.24
