module helmrender

go 1.19
