module github.com/glovebox-dev/glovebox

go 1.26

require github.com/gorilla/websocket v1.5.3 // indirect
