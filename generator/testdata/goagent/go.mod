module example.com/goagent

go 1.26
